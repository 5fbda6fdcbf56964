//! The vault's events lock, `meta/events.lock` (spec "Feedback → Durable event format" and
//! "Error Handling"): every writer of `meta/events.jsonl` — feedback appends, and a conflict
//! resolution page together with its `conflict_selected` event — serializes on it. One
//! implementation for both callers: a per-file in-process mutex plus the lock file, taken by
//! exclusive file creation (`O_EXCL`) and holding `{writerId, pid, hostname, acquiredAt}`.
//! Dropping the guard removes the file (only when it is still ours) and unlocks the mutex.
//!
//! A lock older than [`STALE_AFTER`] is recovered only after confirming that its recorded
//! process, on this host, no longer exists (Unix: `kill(pid, 0)`; elsewhere a lock is never
//! recovered and stays busy). Implicit events wait at most [`IMPLICIT_WAIT`], explicit ones
//! (corrections, conflict choices) [`EXPLICIT_WAIT`]. A lock that stays busy is
//! `Error::EventsLockBusy`; callers whose documented code differs (feedback:
//! `feedback_lock_busy`) map it with [`map_busy`].

use std::collections::HashMap;
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, MutexGuard};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::fsutil::{iso_from_ms, now_ms};
use crate::store::migrate::process_alive;
use crate::util::host::host_name;
use crate::util::time::parse_timestamp;

/// The spec's wait of an implicit event (then dropped with a diagnostic).
pub const IMPLICIT_WAIT: Duration = Duration::from_millis(250);
/// The spec's wait of an explicit correction or conflict choice (then an error).
pub const EXPLICIT_WAIT: Duration = Duration::from_secs(2);
/// A lock older than this may be recovered once its process is confirmed gone. Spec value.
pub const STALE_AFTER: Duration = Duration::from_secs(30);
/// Poll interval while the file is held by another process. Not fitted: short against the
/// 250 ms implicit budget.
const POLL: Duration = Duration::from_millis(5);

/// Content of `meta/events.lock`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct EventsLockOwner {
  /// Random id of this holder (the lock is released only by the holder that wrote it).
  pub writer_id: String,
  /// Process id.
  pub pid: u32,
  /// Host name.
  pub hostname: String,
  /// RFC 3339 acquisition time.
  pub acquired_at: String,
}

/// Held events lock; released (file removed, mutex unlocked) on drop.
pub struct EventsLock {
  path: PathBuf,
  meta: PathBuf,
  writer_id: String,
  _guard: MutexGuard<'static, ()>,
}

impl EventsLock {
  /// The `meta/` directory whose lock this is (appends under the lock go there).
  pub fn meta(&self) -> &Path {
    &self.meta
  }
}

impl std::fmt::Debug for EventsLock {
  fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    f.debug_struct("EventsLock").field("path", &self.path).field("writer_id", &self.writer_id).finish()
  }
}

impl Drop for EventsLock {
  fn drop(&mut self) {
    // Remove only our own lock file (a recovered-and-retaken lock is someone else's).
    if read_owner(&self.path).is_none_or(|o| o.writer_id == self.writer_id) {
      let _ = fs::remove_file(&self.path);
    }
  }
}

/// Path of the events lock of a `meta/` directory.
pub fn lock_path(meta: &Path) -> PathBuf {
  meta.join("events.lock")
}

/// `Error::EventsLockBusy` re-coded by `f` (e.g. `Error::FeedbackLockBusy` for feedback, whose
/// documented code is `feedback_lock_busy`); other errors unchanged.
pub fn map_busy(e: Error, f: impl FnOnce(String) -> Error) -> Error {
  match e {
    Error::EventsLockBusy(m) => f(m),
    other => other,
  }
}

fn in_process(path: &Path) -> &'static Mutex<()> {
  static MAP: OnceLock<Mutex<HashMap<PathBuf, &'static Mutex<()>>>> = OnceLock::new();
  let mut map = MAP.get_or_init(Default::default).lock();
  // One leaked mutex per distinct events file of the process lifetime (a handful of vaults).
  map.entry(path.to_path_buf()).or_insert_with(|| Box::leak(Box::new(Mutex::new(()))))
}

fn read_owner(path: &Path) -> Option<EventsLockOwner> {
  serde_json::from_slice(&fs::read(path).ok()?).ok()
}

/// Whether a lock file's owner may be recovered: older than [`STALE_AFTER`], recorded on this
/// host, and its process gone. An unreadable (torn or foreign) lock file is recovered once its
/// mtime is stale (a writer fills the file at once).
fn recoverable(path: &Path) -> bool {
  match read_owner(path) {
    Some(o) => {
      let age_ms = parse_timestamp(&o.acquired_at).map(|s| now_ms() - s * 1000).unwrap_or(i64::MAX);
      age_ms > STALE_AFTER.as_millis() as i64 && o.hostname == host_name() && !process_alive(o.pid)
    }
    None => fs::metadata(path)
      .and_then(|m| m.modified())
      .ok()
      .and_then(|t| t.elapsed().ok())
      .is_some_and(|age| age > STALE_AFTER),
  }
}

/// Take the events lock of `meta`, waiting at most `wait` (in-process mutex and file together);
/// `Err(EventsLockBusy)` when it stays busy.
pub fn acquire(meta: &Path, wait: Duration) -> Result<EventsLock> {
  let deadline = Instant::now() + wait;
  fs::create_dir_all(meta).map_err(|e| Error::io("create directory", meta, e))?;
  let path = lock_path(meta);
  let key = fs::canonicalize(meta).unwrap_or_else(|_| meta.to_path_buf()).join("events.lock");
  let guard = in_process(&key).try_lock_for(wait).ok_or_else(|| {
    Error::EventsLockBusy(format!(
      "{} is held by another writer of this process (waited {} ms)",
      path.display(),
      wait.as_millis()
    ))
  })?;
  let writer_id = uuid::Uuid::new_v4().simple().to_string();
  loop {
    match OpenOptions::new().write(true).create_new(true).open(&path) {
      Ok(mut f) => {
        let owner = EventsLockOwner {
          writer_id: writer_id.clone(),
          pid: std::process::id(),
          hostname: host_name(),
          acquired_at: iso_from_ms(now_ms()),
        };
        let bytes = serde_json::to_vec(&owner).unwrap_or_default();
        if let Err(e) = f.write_all(&bytes).and_then(|_| f.sync_all()) {
          let _ = fs::remove_file(&path);
          return Err(Error::io("write", &path, e));
        }
        return Ok(EventsLock { path, meta: meta.to_path_buf(), writer_id, _guard: guard });
      }
      Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
        if recoverable(&path) {
          let _ = fs::remove_file(&path);
          continue;
        }
        if Instant::now() >= deadline {
          let who =
            read_owner(&path).map(|o| format!(" by pid {} on {}", o.pid, o.hostname)).unwrap_or_default();
          return Err(Error::EventsLockBusy(format!(
            "{} is held{who} (waited {} ms)",
            path.display(),
            wait.as_millis()
          )));
        }
        std::thread::sleep(POLL);
      }
      Err(e) => return Err(Error::io("create", &path, e)),
    }
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  fn owner(pid: u32, at: &str) -> EventsLockOwner {
    EventsLockOwner { writer_id: "other".into(), pid, hostname: host_name(), acquired_at: at.into() }
  }

  #[test]
  fn busy_then_free_and_stale_recovery() {
    let dir = tempfile::tempdir().unwrap();
    let meta = dir.path().join("meta");
    let held = acquire(&meta, EXPLICIT_WAIT).unwrap();
    assert!(lock_path(&meta).is_file());
    // Same process: the in-process mutex is busy.
    let t = Instant::now();
    let e = acquire(&meta, Duration::from_millis(50)).err().unwrap();
    assert_eq!(e.code(), "events_lock_busy");
    assert!(t.elapsed() >= Duration::from_millis(45));
    drop(held);
    assert!(!lock_path(&meta).exists());
    let _again = acquire(&meta, Duration::ZERO).unwrap();
    drop(_again);
    // A foreign lock of a live process (ours) is busy even when old.
    fs::write(
      lock_path(&meta),
      serde_json::to_vec(&owner(std::process::id(), "2020-01-01T00:00:00Z")).unwrap(),
    )
    .unwrap();
    let t = Instant::now();
    assert_eq!(acquire(&meta, Duration::from_millis(30)).err().unwrap().code(), "events_lock_busy");
    assert!(t.elapsed() >= Duration::from_millis(25));
    // A fresh lock of a dead process is busy too (younger than 30 s).
    let dead = 0x7fff_fff0;
    fs::write(lock_path(&meta), serde_json::to_vec(&owner(dead, &iso_from_ms(now_ms()))).unwrap()).unwrap();
    assert_eq!(acquire(&meta, Duration::from_millis(30)).err().unwrap().code(), "events_lock_busy");
    // Old + dead process on this host: recovered, and our release removes our file.
    fs::write(lock_path(&meta), serde_json::to_vec(&owner(dead, "2020-01-01T00:00:00Z")).unwrap()).unwrap();
    #[cfg(unix)]
    {
      let l = acquire(&meta, Duration::from_millis(30)).unwrap();
      drop(l);
      assert!(!lock_path(&meta).exists());
    }
  }

  #[test]
  fn release_leaves_a_lock_that_is_not_ours() {
    let dir = tempfile::tempdir().unwrap();
    let meta = dir.path().join("meta");
    let held = acquire(&meta, EXPLICIT_WAIT).unwrap();
    // Someone recovered and retook it meanwhile: our drop must not remove their file.
    fs::write(
      lock_path(&meta),
      serde_json::to_vec(&owner(std::process::id(), "2020-01-01T00:00:00Z")).unwrap(),
    )
    .unwrap();
    drop(held);
    assert!(lock_path(&meta).is_file());
  }

  #[test]
  fn busy_is_recoded_for_feedback() {
    let e = map_busy(Error::EventsLockBusy("x".into()), Error::FeedbackLockBusy);
    assert_eq!(e.code(), "feedback_lock_busy");
    let e = map_busy(Error::invalid("y"), Error::FeedbackLockBusy);
    assert_eq!(e.code(), "invalid_argument");
  }

  #[test]
  fn threads_never_hold_it_together() {
    let dir = tempfile::tempdir().unwrap();
    let meta = dir.path().join("meta");
    let inside = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    std::thread::scope(|s| {
      for _ in 0..8 {
        let (meta, inside) = (meta.clone(), inside.clone());
        s.spawn(move || {
          for _ in 0..5 {
            let _l = acquire(&meta, Duration::from_secs(20)).unwrap();
            assert_eq!(inside.fetch_add(1, std::sync::atomic::Ordering::SeqCst), 0);
            std::thread::sleep(Duration::from_millis(1));
            inside.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
          }
        });
      }
    });
    assert!(!lock_path(&meta).exists());
  }
}
