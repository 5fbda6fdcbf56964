//! The vault's events lock, `meta/events.lock` (spec "Feedback → Durable event format"): writers
//! of internal records — a conflict resolution page together with its event, feedback appends —
//! serialize on it. The lock is a file created exclusively (`O_EXCL`), holding
//! `{writer, pid, hostname, acquiredAt}`; dropping the guard removes it. A lock older than
//! [`STALE_AFTER`] is recovered only when its recorded process is on this host and no longer
//! exists. Explicit operations wait up to [`EXPLICIT_WAIT`]; implicit ones up to
//! [`IMPLICIT_WAIT`].

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::fsutil::{now_iso, now_ms};
use crate::vault::VaultPaths;

/// Longest wait of an explicit operation (a correction or a conflict choice). Spec value.
pub const EXPLICIT_WAIT: Duration = Duration::from_secs(2);
/// Longest wait of an implicit event (may then be dropped with a diagnostic). Spec value.
pub const IMPLICIT_WAIT: Duration = Duration::from_millis(250);
/// Age after which a lock whose local process is gone may be recovered. Spec value.
pub const STALE_AFTER: Duration = Duration::from_secs(30);
/// Poll interval while waiting. Not fitted: short against the 250 ms implicit budget.
const POLL: Duration = Duration::from_millis(10);

/// Content of the lock file.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LockOwner {
  /// Unique id of this acquisition.
  pub writer: String,
  /// Process id of the holder.
  pub pid: u32,
  /// Host of the holder.
  pub hostname: String,
  /// When the lock was taken (RFC 3339).
  pub acquired_at: String,
  /// When the lock was taken (ms since the epoch), for the age check.
  #[serde(default)]
  pub acquired_at_ms: i64,
}

/// A held events lock; released (file removed) on drop.
#[derive(Debug)]
pub struct EventsLock {
  path: PathBuf,
  writer: String,
}

/// Path of a vault's events lock.
pub fn lock_path(paths: &VaultPaths) -> PathBuf {
  paths.meta.join("events.lock")
}

fn host() -> String {
  hostname::get().map(|h| h.to_string_lossy().into_owned()).unwrap_or_default()
}

/// True when the lock at `path` may be removed: older than [`STALE_AFTER`] (by its recorded
/// time, or by the file's mtime when the content is unreadable) and its local process is gone.
fn recoverable(path: &Path) -> bool {
  let age_ms = |ms: i64| now_ms().saturating_sub(ms);
  let stale_ms = STALE_AFTER.as_millis() as i64;
  match fs::read(path).ok().and_then(|b| serde_json::from_slice::<LockOwner>(&b).ok()) {
    Some(o) => {
      o.acquired_at_ms > 0
        && age_ms(o.acquired_at_ms) > stale_ms
        && o.hostname == host()
        && !crate::store::migrate::process_alive(o.pid)
    }
    None => {
      // Torn or foreign content: only its age can tell (a writer fills the file at once).
      let mtime = fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_millis() as i64);
      mtime.is_some_and(|m| age_ms(m) > stale_ms)
    }
  }
}

impl EventsLock {
  /// Take the events lock of `paths`, waiting up to `wait`. `Err(EventsLockBusy)` when another
  /// writer still holds it then.
  pub fn acquire(paths: &VaultPaths, wait: Duration) -> Result<EventsLock> {
    let path = lock_path(paths);
    fs::create_dir_all(&paths.meta).map_err(|e| Error::io("create directory", &paths.meta, e))?;
    let started = Instant::now();
    loop {
      match OpenOptions::new().write(true).create_new(true).open(&path) {
        Ok(mut f) => {
          let writer = uuid::Uuid::new_v4().simple().to_string();
          let owner = LockOwner {
            writer: writer.clone(),
            pid: std::process::id(),
            hostname: host(),
            acquired_at: now_iso(),
            acquired_at_ms: now_ms(),
          };
          let bytes = serde_json::to_vec(&owner).unwrap_or_default();
          let lock = EventsLock { path: path.clone(), writer };
          f.write_all(&bytes).and_then(|_| f.sync_all()).map_err(|e| Error::io("write", &path, e))?;
          return Ok(lock);
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
          if recoverable(&path) {
            let _ = fs::remove_file(&path);
            continue;
          }
          if started.elapsed() >= wait {
            return Err(Error::EventsLockBusy(format!(
              "{} is held by another writer (waited {} ms)",
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
}

impl Drop for EventsLock {
  fn drop(&mut self) {
    // Remove only our own lock (a recovered-then-retaken lock belongs to someone else).
    let ours = fs::read(&self.path)
      .ok()
      .and_then(|b| serde_json::from_slice::<LockOwner>(&b).ok())
      .is_none_or(|o| o.writer == self.writer);
    if ours {
      let _ = fs::remove_file(&self.path);
    }
  }
}

#[cfg(test)]
mod tests {
  use super::*;
  use crate::testkit::temp_vault;

  #[test]
  fn exclusive_then_released() {
    let (_t, p) = temp_vault();
    let a = EventsLock::acquire(&p, EXPLICIT_WAIT).unwrap();
    let started = Instant::now();
    let e = EventsLock::acquire(&p, Duration::from_millis(100)).unwrap_err();
    assert_eq!(e.code(), "events_lock_busy");
    assert!(started.elapsed() >= Duration::from_millis(100));
    drop(a);
    assert!(!lock_path(&p).exists());
    let _b = EventsLock::acquire(&p, Duration::ZERO).unwrap();
  }

  #[test]
  fn stale_lock_of_a_dead_process_is_recovered_a_live_one_is_not() {
    let (_t, p) = temp_vault();
    std::fs::create_dir_all(&p.meta).unwrap();
    let old = now_ms() - 31_000;
    let write = |pid: u32, at: i64| {
      let o = LockOwner {
        writer: "w".into(),
        pid,
        hostname: host(),
        acquired_at: crate::fsutil::iso_from_ms(at),
        acquired_at_ms: at,
      };
      std::fs::write(lock_path(&p), serde_json::to_vec(&o).unwrap()).unwrap();
    };
    // Old but alive (this process): busy.
    write(std::process::id(), old);
    assert!(EventsLock::acquire(&p, Duration::from_millis(20)).is_err());
    // Young and dead: busy (the spec recovers only locks older than 30 s).
    write(0x7fff_fffe, now_ms());
    assert!(EventsLock::acquire(&p, Duration::from_millis(20)).is_err());
    // Old and dead: recovered.
    #[cfg(unix)]
    {
      write(0x7fff_fffe, old);
      let l = EventsLock::acquire(&p, Duration::from_millis(20)).unwrap();
      drop(l);
    }
  }

  #[test]
  fn threads_never_hold_it_together() {
    let (_t, p) = temp_vault();
    let inside = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    std::thread::scope(|s| {
      for _ in 0..8 {
        let (p, inside) = (p.clone(), inside.clone());
        s.spawn(move || {
          for _ in 0..5 {
            let _l = EventsLock::acquire(&p, Duration::from_secs(20)).unwrap();
            assert_eq!(inside.fetch_add(1, std::sync::atomic::Ordering::SeqCst), 0);
            std::thread::sleep(Duration::from_millis(1));
            inside.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
          }
        });
      }
    });
  }
}
