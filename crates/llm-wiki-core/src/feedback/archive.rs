//! The archives of explicit compactions (`meta/events-archive/`): their manifests, the identity
//! and sums of the committed ones (what the projection starts a fold from), and the recovery of
//! an interrupted run ([`super::compact`] writes them).

use std::fs::{self, File};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::events::events_path;
use super::sums::Projection;
use crate::error::{Error, Result};
use crate::fsutil::{atomic_write, sync_dir};
use crate::util::hash::hex;

/// Folder of the archives, under `meta/`.
pub const ARCHIVE_DIR: &str = "events-archive";

/// Manifest format version.
pub const MANIFEST_VERSION: u32 = 1;

/// `pending` until the stream rename is known to have happened, then `committed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ArchiveState {
  /// Written before the stream rename; not counted by readers.
  Pending,
  /// The stream no longer holds the archived lines; readers count the sums.
  Committed,
}

/// `recall-feedback-<stamp>-<run>.json`: what one compaction moved.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArchiveManifest {
  /// [`MANIFEST_VERSION`].
  pub version: u32,
  /// Random id of the run.
  pub run_id: String,
  /// See [`ArchiveState`].
  pub state: ArchiveState,
  /// RFC 3339 time of the run.
  pub created_at: String,
  /// Events strictly older than this (RFC 3339) were moved.
  pub cutoff: String,
  /// File name of the archived lines (same folder).
  pub archive: String,
  /// Lines and bytes moved; sha256 of the archive file.
  pub lines: u64,
  /// Bytes moved.
  pub bytes: u64,
  /// sha256 (hex) of the archive file.
  pub archive_sha256: String,
  /// Length and sha256 of the stream the run read.
  pub source_len: u64,
  /// sha256 (hex) of the source stream's `source_len` bytes.
  pub source_sha256: String,
  /// Length and sha256 of the stream the run wrote (a prefix of every later stream).
  pub result_len: u64,
  /// sha256 (hex) of the new stream's `result_len` bytes.
  pub result_sha256: String,
  /// Scaled sums (and named corrections / resolutions) of the archived events.
  pub sums: Projection,
}

pub(super) fn archive_dir(meta: &Path) -> PathBuf {
  meta.join(ARCHIVE_DIR)
}

fn failed(msg: impl Into<String>) -> Error {
  Error::FeedbackCompaction(msg.into())
}

pub(super) fn manifests(meta: &Path) -> Vec<(PathBuf, Option<ArchiveManifest>)> {
  let Ok(rd) = fs::read_dir(archive_dir(meta)) else { return vec![] };
  let mut out: Vec<(PathBuf, Option<ArchiveManifest>)> = rd
    .flatten()
    .map(|e| e.path())
    .filter(|p| {
      p.extension().is_some_and(|x| x == "json")
        && p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("recall-feedback-"))
    })
    .map(|p| {
      let m = fs::read(&p).ok().and_then(|b| serde_json::from_slice(&b).ok());
      (p, m)
    })
    .collect();
  out.sort_by(|a, b| a.0.cmp(&b.0));
  out
}

/// Identity of the committed archives (names of their manifests, hashed): the projection refolds
/// when it changes. Empty without archives (one `stat`).
pub fn archive_key(meta: &Path) -> String {
  let dir = archive_dir(meta);
  if !dir.is_dir() {
    return String::new();
  }
  let names: Vec<String> = manifests(meta)
    .into_iter()
    .filter(|(_, m)| m.as_ref().is_some_and(|m| m.state == ArchiveState::Committed))
    .filter_map(|(p, _)| p.file_name().map(|n| n.to_string_lossy().into_owned()))
    .collect();
  if names.is_empty() {
    return String::new();
  }
  hex(&Sha256::digest(names.join("\n").as_bytes()))[..16].to_string()
}

/// The key of [`archive_key`] and the sums of every committed archive.
pub fn committed_shares(meta: &Path) -> (String, Vec<Projection>) {
  let key = archive_key(meta);
  if key.is_empty() {
    return (key, vec![]);
  }
  let shares = manifests(meta)
    .into_iter()
    .filter_map(|(_, m)| m)
    .filter(|m| m.state == ArchiveState::Committed)
    .map(|m| m.sums)
    .collect();
  (key, shares)
}

/// Whether an interrupted run left something for [`recover`] (a pending or unreadable manifest,
/// an archive without manifest, a temporary stream).
pub fn needs_recovery(meta: &Path) -> bool {
  let tmp = fs::read_dir(meta).into_iter().flatten().flatten().any(|e| is_stream_tmp(&e.path()));
  tmp
    || manifests(meta).iter().any(|(_, m)| m.as_ref().is_none_or(|m| m.state == ArchiveState::Pending))
    || orphan_archives(meta).next().is_some()
}

fn is_stream_tmp(p: &Path) -> bool {
  p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("events.jsonl.compact-"))
}

fn orphan_archives(meta: &Path) -> impl Iterator<Item = PathBuf> {
  let dir = archive_dir(meta);
  fs::read_dir(&dir)
    .into_iter()
    .flatten()
    .flatten()
    .map(|e| e.path())
    .filter(|p| p.extension().is_some_and(|x| x == "jsonl") && !p.with_extension("json").is_file())
}

/// sha256 of the first `len` bytes of `path` (None when shorter), streaming.
fn prefix_sha(path: &Path, len: u64) -> Option<String> {
  let f = File::open(path).ok()?;
  if f.metadata().ok()?.len() < len {
    return None;
  }
  let mut h = Sha256::new();
  let mut r = BufReader::with_capacity(1 << 16, f.take(len));
  loop {
    let buf = r.fill_buf().ok()?;
    if buf.is_empty() {
      break;
    }
    h.update(buf);
    let n = buf.len();
    r.consume(n);
  }
  Some(hex(&h.finalize()))
}

/// Settle what an interrupted run left (the caller holds the events lock): temporary streams and
/// archives without manifest are removed (the stream still holds those lines); a `pending`
/// manifest is completed or undone by comparing the stream with the source and result hashes it
/// records. Returns what was done; `feedback_compaction_failed` when the stream matches neither
/// (rewritten by something else: everything is left in place). A projection cached before it
/// is stale when it did something ([`super::compact::recover`] drops it).
pub fn settle(meta: &Path) -> Result<Vec<String>> {
  let mut done = Vec::new();
  for e in fs::read_dir(meta).into_iter().flatten().flatten() {
    let p = e.path();
    if is_stream_tmp(&p) {
      fs::remove_file(&p).map_err(|e| Error::io("remove", &p, e))?;
      done.push(format!(
        "removed the unfinished stream {}",
        p.file_name().unwrap_or_default().to_string_lossy()
      ));
    }
  }
  let stream = events_path(meta);
  for (path, m) in manifests(meta) {
    let name = path.file_name().unwrap_or_default().to_string_lossy().into_owned();
    let Some(mut m) = m else {
      // atomic_write never leaves a torn manifest; an unreadable one is someone else's file.
      return Err(failed(format!("archive manifest {name} is unreadable; left in place")));
    };
    if m.state == ArchiveState::Committed {
      continue;
    }
    let archive = archive_dir(meta).join(&m.archive);
    if prefix_sha(&stream, m.source_len).as_deref() == Some(m.source_sha256.as_str()) {
      // The rename did not happen: the stream still holds every archived line.
      let _ = fs::remove_file(&archive);
      fs::remove_file(&path).map_err(|e| Error::io("remove", &path, e))?;
      done.push(format!("undid the interrupted compaction {} (its lines are still in the stream)", m.run_id));
    } else if prefix_sha(&stream, m.result_len).as_deref() == Some(m.result_sha256.as_str()) {
      if prefix_sha(&archive, m.bytes).as_deref() != Some(m.archive_sha256.as_str()) {
        return Err(failed(format!("archive {} does not match its manifest; left in place", m.archive)));
      }
      m.state = ArchiveState::Committed;
      write_manifest(&path, &m)?;
      done.push(format!("completed the interrupted compaction {}", m.run_id));
    } else {
      return Err(failed(format!(
        "meta/events.jsonl matches neither the stream compaction {} read nor the one it wrote; archive {} left in place",
        m.run_id, m.archive
      )));
    }
  }
  for p in orphan_archives(meta).collect::<Vec<_>>() {
    fs::remove_file(&p).map_err(|e| Error::io("remove", &p, e))?;
    done.push(format!(
      "removed the unfinished archive {} (its lines are still in the stream)",
      p.file_name().unwrap_or_default().to_string_lossy()
    ));
  }
  if !done.is_empty() {
    sync_dir(meta);
    sync_dir(&archive_dir(meta));
  }
  Ok(done)
}

pub(super) fn write_manifest(path: &Path, m: &ArchiveManifest) -> Result<()> {
  let bytes = serde_json::to_vec(m).map_err(|e| failed(format!("manifest: {e}")))?;
  atomic_write(path, &bytes)
}
