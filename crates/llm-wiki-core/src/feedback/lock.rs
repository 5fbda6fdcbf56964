//! The events lock (spec "Feedback" / "Error Handling"): writers of `meta/events.jsonl` are
//! serialized by a per-file in-process mutex plus `meta/events.lock`, taken by exclusive file
//! creation and holding `{writerId, pid, hostname, acquiredAt}`. A lock older than 30 seconds
//! is recovered only after confirming that its recorded process, on this host, no longer exists
//! (Unix: `kill(pid, 0)`; elsewhere a lock is never recovered and stays busy). Implicit events
//! wait at most [`IMPLICIT_WAIT`], explicit ones [`EXPLICIT_WAIT`].

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
use crate::retrieve::trust::parse_timestamp;
use crate::store::lock::host_name;

/// The spec's wait of an implicit event (then dropped with a diagnostic).
pub const IMPLICIT_WAIT: Duration = Duration::from_millis(250);
/// The spec's wait of an explicit correction or conflict choice (then an error).
pub const EXPLICIT_WAIT: Duration = Duration::from_secs(2);
/// A lock older than this may be recovered once its process is confirmed gone.
pub const STALE_AFTER: Duration = Duration::from_secs(30);

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
  writer_id: String,
  _guard: MutexGuard<'static, ()>,
}

impl Drop for EventsLock {
  fn drop(&mut self) {
    // Remove only our own lock file (a recovered-and-retaken lock is someone else's).
    if read_owner(&self.path).is_some_and(|o| o.writer_id == self.writer_id) {
      let _ = fs::remove_file(&self.path);
    }
  }
}

/// Path of the events lock of a `meta/` directory.
pub fn lock_path(meta: &Path) -> PathBuf {
  meta.join("events.lock")
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

/// Whether process `pid` on this host is alive. Unix: `kill(pid, 0)` succeeds or is refused
/// with EPERM. Elsewhere we cannot tell cheaply and answer "alive" (never steal a lock).
pub fn process_alive(pid: u32) -> bool {
  #[cfg(unix)]
  {
    if pid == 0 || pid > i32::MAX as u32 {
      return false;
    }
    // SAFETY: signal 0 only checks for existence and permission.
    let r = unsafe { libc::kill(pid as i32, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
  }
  #[cfg(not(unix))]
  {
    let _ = pid;
    true
  }
}

/// Whether a lock file's owner may be recovered: older than [`STALE_AFTER`], recorded on this
/// host, and its process gone. An unreadable lock file is recovered once its mtime is stale.
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

/// Take the events lock of `meta`, waiting at most `wait`; `Err(FeedbackLockBusy)` when it
/// stays busy.
pub fn acquire(meta: &Path, wait: Duration) -> Result<EventsLock> {
  let deadline = Instant::now() + wait;
  fs::create_dir_all(meta).map_err(|e| Error::io("create directory", meta, e))?;
  let path = lock_path(meta);
  let key = fs::canonicalize(meta).unwrap_or_else(|_| meta.to_path_buf()).join("events.lock");
  let guard = in_process(&key)
    .try_lock_for(wait)
    .ok_or_else(|| Error::FeedbackLockBusy(format!("{} (held in this process)", path.display())))?;
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
        if let Err(e) = f.write_all(&bytes) {
          let _ = fs::remove_file(&path);
          return Err(Error::io("write", &path, e));
        }
        return Ok(EventsLock { path, writer_id, _guard: guard });
      }
      Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
        if recoverable(&path) {
          let _ = fs::remove_file(&path);
          continue;
        }
        if Instant::now() >= deadline {
          let who = read_owner(&path).map(|o| format!("pid {} on {}", o.pid, o.hostname)).unwrap_or_default();
          return Err(Error::FeedbackLockBusy(format!("{} held by {who}", path.display())));
        }
        std::thread::sleep(Duration::from_millis(5));
      }
      Err(e) => return Err(Error::io("create", &path, e)),
    }
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn busy_then_free_and_stale_recovery() {
    let dir = tempfile::tempdir().unwrap();
    let meta = dir.path().join("meta");
    let held = acquire(&meta, EXPLICIT_WAIT).unwrap();
    assert!(lock_path(&meta).is_file());
    // Same process: the in-process mutex is busy.
    let t = Instant::now();
    let e = acquire(&meta, Duration::from_millis(50)).err().unwrap();
    assert_eq!(e.code(), "feedback_lock_busy");
    assert!(t.elapsed() >= Duration::from_millis(45));
    drop(held);
    assert!(!lock_path(&meta).exists());
    // A foreign lock of a live process (ours) is busy even when old.
    let owner = |pid: u32, at: &str| EventsLockOwner {
      writer_id: "other".into(),
      pid,
      hostname: host_name(),
      acquired_at: at.into(),
    };
    fs::write(
      lock_path(&meta),
      serde_json::to_vec(&owner(std::process::id(), "2020-01-01T00:00:00Z")).unwrap(),
    )
    .unwrap();
    assert_eq!(acquire(&meta, Duration::from_millis(30)).err().unwrap().code(), "feedback_lock_busy");
    // A fresh lock of a dead process is busy too (younger than 30 s).
    let dead = 0x7fff_fff0;
    fs::write(lock_path(&meta), serde_json::to_vec(&owner(dead, &iso_from_ms(now_ms()))).unwrap()).unwrap();
    assert_eq!(acquire(&meta, Duration::from_millis(30)).err().unwrap().code(), "feedback_lock_busy");
    // Old + dead process on this host: recovered.
    fs::write(lock_path(&meta), serde_json::to_vec(&owner(dead, "2020-01-01T00:00:00Z")).unwrap()).unwrap();
    #[cfg(unix)]
    {
      let l = acquire(&meta, Duration::from_millis(30)).unwrap();
      drop(l);
    }
  }
}
