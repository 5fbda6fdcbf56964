//! The durable `recall_feedback` event (spec "Durable event format") and its append to
//! `meta/events.jsonl`: one JSON line written by a single `write` under the events lock, then
//! fsynced. Other event kinds in the stream (the extension's `observe`, `ingest`, ...) are left
//! alone and skipped by readers.

use std::fs::{self, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::FeedbackAction;
use crate::error::{Error, Result};
use crate::events_lock::{self, EventsLock};

/// `kind` of a feedback event in the shared stream.
pub const KIND: &str = "recall_feedback";
/// Schema version written and accepted.
pub const SCHEMA: u32 = 1;

/// One `recall_feedback` line of `meta/events.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FeedbackEvent {
  /// Always [`SCHEMA`].
  pub schema: u32,
  /// RFC 3339 time of the event.
  pub timestamp: String,
  /// Always `internal` (generated human-readable logs omit it).
  pub visibility: String,
  /// Always [`KIND`].
  pub kind: String,
  /// Stable vault id.
  pub vault_id: String,
  /// Page id (path under `wiki/` without `.md`).
  pub page_id: String,
  /// SHA-256 of the normalized query ([`super::query_hash`]); empty when no query applies (a
  /// conflict choice outside a recall).
  pub query_hash: String,
  /// Retrieval mode that produced the result.
  pub mode: String,
  /// Index version: `<manifest version>:<generation>` of the store that answered.
  pub index_version: String,
  /// Model identity: the store's chunk counter (`tokenizer:<model id>` or `estimate`).
  pub model_version: String,
  /// 0-based rank of the result when it was shown.
  pub shown_rank: Option<u32>,
  /// What happened.
  pub action: FeedbackAction,
  /// For `corrected`: id of the correction observation page (replay matches it).
  #[serde(default, skip_serializing_if = "Option::is_none")]
  pub observation: Option<String>,
  /// For `conflict_selected` appended by `resolveConflict`: id of the resolution record (a
  /// rebuild replays a record whose event is missing).
  #[serde(default, skip_serializing_if = "Option::is_none")]
  pub resolution: Option<String>,
}

impl FeedbackEvent {
  /// Checks a parsed event: schema, visibility, non-empty ids.
  pub fn validate(&self) -> std::result::Result<(), String> {
    if self.schema != SCHEMA {
      return Err(format!("schema {} is not {SCHEMA}", self.schema));
    }
    if self.visibility != "internal" {
      return Err(format!("visibility {:?} is not internal", self.visibility));
    }
    if self.vault_id.is_empty() || self.page_id.is_empty() {
      return Err("vault_id and page_id must be non-empty".into());
    }
    Ok(())
  }
}

/// `meta/events.jsonl` of a `meta/` directory.
pub fn events_path(meta: &Path) -> PathBuf {
  meta.join("events.jsonl")
}

/// Append events (one line each) under the events lock, waiting at most `wait` for it
/// (`feedback_lock_busy` when it stays busy). See [`append_events_locked`].
pub fn append_events(meta: &Path, events: &[FeedbackEvent], wait: Duration) -> Result<()> {
  if events.is_empty() {
    return Ok(());
  }
  let held =
    events_lock::acquire(meta, wait).map_err(|e| events_lock::map_busy(e, Error::FeedbackLockBusy))?;
  append_events_locked(&held, events)
}

/// Append events (one line each) to the stream of the lock's `meta/` while the caller holds
/// `held` (a conflict resolution appends its `conflict_selected` in the same hold as its page).
/// One `write`, then fsync. A file whose last line was torn by a dead writer is terminated
/// first, so the torn bytes stay (and the stream reports them as corrupt) and the new line is
/// whole.
pub fn append_events_locked(held: &EventsLock, events: &[FeedbackEvent]) -> Result<()> {
  if events.is_empty() {
    return Ok(());
  }
  let mut buf = Vec::new();
  for e in events {
    serde_json::to_writer(&mut buf, e).map_err(|err| Error::invalid(format!("event: {err}")))?;
    buf.push(b'\n');
  }
  crate::store::swap::crash_point("feedback_append");
  let path = events_path(held.meta());
  let mut f = OpenOptions::new()
    .create(true)
    .read(true)
    .append(true)
    .open(&path)
    .map_err(|e| Error::io("open", &path, e))?;
  let len = f.metadata().map_err(|e| Error::io("stat", &path, e))?.len();
  if len > 0 {
    let mut last = [0u8; 1];
    f.seek(SeekFrom::Start(len - 1)).map_err(|e| Error::io("seek", &path, e))?;
    f.read_exact(&mut last).map_err(|e| Error::io("read", &path, e))?;
    if last[0] != b'\n' {
      buf.insert(0, b'\n');
    }
  }
  f.write_all(&buf).map_err(|e| Error::io("append", &path, e))?;
  f.sync_data().map_err(|e| Error::io("fsync", &path, e))?;
  Ok(())
}

/// Size of the events file (0 when missing).
pub fn events_len(meta: &Path) -> u64 {
  fs::metadata(events_path(meta)).map(|m| m.len()).unwrap_or(0)
}

#[cfg(test)]
pub(crate) mod tests {
  use super::*;

  pub(crate) fn ev(page: &str, action: FeedbackAction) -> FeedbackEvent {
    FeedbackEvent {
      schema: SCHEMA,
      timestamp: crate::fsutil::now_iso(),
      visibility: "internal".into(),
      kind: KIND.into(),
      vault_id: "v".into(),
      page_id: page.into(),
      query_hash: super::super::query_hash("q"),
      mode: "lexical".into(),
      index_version: "1:1".into(),
      model_version: "estimate".into(),
      shown_rank: Some(0),
      action,
      observation: None,
      resolution: None,
    }
  }

  #[test]
  fn concurrent_appends_are_whole_lines() {
    let dir = tempfile::tempdir().unwrap();
    let meta = dir.path().join("meta");
    let threads: Vec<_> = (0..8)
      .map(|t| {
        let meta = meta.clone();
        std::thread::spawn(move || {
          for i in 0..25 {
            let e = ev(&format!("p{t}-{i}"), FeedbackAction::Opened);
            // Whole lines is the point, not the wait: 200 fsynced appends queue for long on a
            // loaded machine, so the wait is generous.
            append_events(&meta, &[e], Duration::from_secs(120)).unwrap();
          }
        })
      })
      .collect();
    for t in threads {
      t.join().unwrap();
    }
    let text = fs::read_to_string(events_path(&meta)).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 200);
    for l in lines {
      let e: FeedbackEvent = serde_json::from_str(l).unwrap();
      e.validate().unwrap();
    }
    assert!(events_lock::acquire(&meta, std::time::Duration::ZERO).is_ok(), "the lock is released");
  }

  #[test]
  fn torn_tail_is_kept_and_terminated() {
    let dir = tempfile::tempdir().unwrap();
    let meta = dir.path().join("meta");
    fs::create_dir_all(&meta).unwrap();
    fs::write(events_path(&meta), "{\"kind\":\"observe\"}\n{\"schema\":1,\"tim").unwrap();
    append_events(&meta, &[ev("a", FeedbackAction::Cited)], events_lock::IMPLICIT_WAIT).unwrap();
    let text = fs::read_to_string(events_path(&meta)).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[1], "{\"schema\":1,\"tim");
    assert!(serde_json::from_str::<FeedbackEvent>(lines[2]).is_ok());
  }
}
