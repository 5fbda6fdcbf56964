//! The vault's events lock, `meta/events.lock` (spec "Feedback → Durable event format" and
//! "Error Handling"): every writer of `meta/events.jsonl` — feedback appends, and a conflict
//! resolution page together with its `conflict_selected` event — serializes on it. One
//! implementation for both callers: a per-file in-process mutex plus an exclusive OS advisory
//! lock on the file (`flock` on Unix, `LockFileEx` on Windows, through `std::fs::File::try_lock`,
//! as the store's writer lock `store::lock`). The OS releases it when the holder's handle closes,
//! also when the process dies, so there is no stale lock to judge: no pid check (which failed
//! across containers sharing a host name and could not be done on Windows), no check-then-remove
//! takeover (two processes judging one lock stale could delete each other's).
//!
//! The file stays in place: removing it would let a process that opened the old file and one
//! that created a new one both hold "the" lock. After taking the lock the holder writes
//! `{writerId, pid, hostname, acquiredAt}` into it for a human reading it; nothing decides by
//! its content. Implicit events wait at most [`IMPLICIT_WAIT`], explicit ones (corrections,
//! conflict choices) [`EXPLICIT_WAIT`], polling the OS lock. A lock that stays busy is
//! `Error::EventsLockBusy`; callers whose documented code differs (feedback:
//! `feedback_lock_busy`) map it with [`map_busy`].

use std::collections::HashMap;
use std::fs::{self, File, TryLockError};
use std::io::{Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, MutexGuard};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::fsutil::{iso_from_ms, now_ms};
use crate::util::file_lock::open_lock_file;
use crate::util::host::host_name;

/// The spec's wait of an implicit event (then dropped with a diagnostic).
pub const IMPLICIT_WAIT: Duration = Duration::from_millis(250);
/// The spec's wait of an explicit correction or conflict choice (then an error).
pub const EXPLICIT_WAIT: Duration = Duration::from_secs(2);
/// Poll interval while the file is locked by another process. Not fitted: short against the
/// 250 ms implicit budget.
const POLL: Duration = Duration::from_millis(5);

/// What the holder writes into `meta/events.lock` (informational).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct EventsLockOwner {
  /// Random id of this holder.
  pub writer_id: String,
  /// Process id.
  pub pid: u32,
  /// Host name.
  pub hostname: String,
  /// RFC 3339 acquisition time.
  pub acquired_at: String,
}

/// Held events lock; released (OS lock, then the in-process mutex) on drop.
pub struct EventsLock {
  path: PathBuf,
  meta: PathBuf,
  writer_id: String,
  /// The locked file; closing it releases the OS lock.
  file: Option<File>,
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
    // The record goes while the lock is held (a later holder writes its own); the file stays.
    if let Some(f) = self.file.as_mut() {
      let _ = f.set_len(0);
    }
    drop(self.file.take());
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

/// The record in a lock file, if it holds one (for messages and tests; never decides anything).
pub fn read_owner(path: &Path) -> Option<EventsLockOwner> {
  serde_json::from_slice(&fs::read(path).ok()?).ok()
}

/// Take the events lock of `meta`, waiting at most `wait` (in-process mutex and OS lock
/// together); `Err(EventsLockBusy)` when it stays busy.
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
  let mut file = open_lock_file(&path).map_err(|e| Error::io("open lock file", &path, e))?;
  loop {
    match file.try_lock() {
      Ok(()) => break,
      Err(TryLockError::WouldBlock) => {
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
      Err(TryLockError::Error(e)) => return Err(Error::io("lock", &path, e)),
    }
  }
  let writer_id = uuid::Uuid::new_v4().simple().to_string();
  let owner = EventsLockOwner {
    writer_id: writer_id.clone(),
    pid: std::process::id(),
    hostname: host_name(),
    acquired_at: iso_from_ms(now_ms()),
  };
  // Informational, so not synced, and a failed write does not fail the lock.
  let bytes = serde_json::to_vec(&owner).unwrap_or_default();
  let _ = file.set_len(0).and_then(|_| file.rewind()).and_then(|_| file.write_all(&bytes));
  crate::store::swap::crash_point("events-locked");
  Ok(EventsLock { path, meta: meta.to_path_buf(), writer_id, file: Some(file), _guard: guard })
}

#[cfg(test)]
mod tests {
  use super::*;
  use std::io::BufReader;

  #[test]
  fn busy_then_free_and_the_file_stays() {
    let dir = tempfile::tempdir().unwrap();
    let meta = dir.path().join("meta");
    let held = acquire(&meta, EXPLICIT_WAIT).unwrap();
    assert_eq!(read_owner(&lock_path(&meta)).unwrap().pid, std::process::id());
    // Same process: the in-process mutex is busy.
    let t = Instant::now();
    let e = acquire(&meta, Duration::from_millis(50)).err().unwrap();
    assert_eq!(e.code(), "events_lock_busy");
    assert!(t.elapsed() >= Duration::from_millis(45));
    drop(held);
    assert!(lock_path(&meta).is_file(), "the lock file is never removed");
    assert!(read_owner(&lock_path(&meta)).is_none(), "the holder's record goes with the lock");
    let _again = acquire(&meta, Duration::ZERO).unwrap();
  }

  /// Whatever a lock file says (an old record of a dead process, of a live one, garbage), it is
  /// not a lock: only a holder of the OS lock makes it busy.
  #[test]
  fn the_file_content_decides_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let meta = dir.path().join("meta");
    fs::create_dir_all(&meta).unwrap();
    for content in [
      serde_json::json!({"writerId": "x", "pid": std::process::id(), "hostname": host_name(), "acquiredAt": iso_from_ms(now_ms())}).to_string(),
      serde_json::json!({"writerId": "x", "pid": 0x7fff_fff0_u32, "hostname": "elsewhere", "acquiredAt": "2020-01-01T00:00:00Z"}).to_string(),
      "{torn".to_string(),
    ] {
      fs::write(lock_path(&meta), content).unwrap();
      let l = acquire(&meta, Duration::ZERO).expect("a file nobody locks is free");
      assert_eq!(read_owner(&lock_path(&meta)).unwrap().writer_id, l.writer_id);
    }
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
  }

  /// Child side of the cross-process tests (run only through them).
  #[test]
  #[ignore]
  fn events_lock_holder_child() {
    let Some(dir) = std::env::var_os("LLM_WIKI_TEST_EVENTS_META") else { return };
    let _lock = acquire(Path::new(&dir), EXPLICIT_WAIT).unwrap();
    println!("held");
    let hold_ms: u64 = std::env::var("LLM_WIKI_TEST_HOLD_MS").ok().and_then(|v| v.parse().ok()).unwrap_or(0);
    if hold_ms > 0 {
      std::thread::sleep(Duration::from_millis(hold_ms));
      return;
    }
    loop {
      std::thread::park();
    }
  }

  fn holder(meta: &Path, hold_ms: u64) -> (std::process::Child, BufReader<std::process::ChildStdout>) {
    let hold = hold_ms.to_string();
    crate::testkit::spawn_holder(
      "events_lock::tests::events_lock_holder_child",
      &[("LLM_WIKI_TEST_EVENTS_META", meta.as_os_str()), ("LLM_WIKI_TEST_HOLD_MS", hold.as_ref())],
    )
  }

  /// A live holder in another process makes the lock busy for the whole wait (implicit events:
  /// 250 ms), whatever its record says or how old it is; the moment it is killed (no destructor
  /// runs) the lock is free, with no stale-age wait and no pid check.
  #[test]
  fn another_process_holds_it_until_killed() {
    let dir = tempfile::tempdir().unwrap();
    let meta = dir.path().join("meta");
    let (mut child, _out) = holder(&meta, 0);
    assert_eq!(read_owner(&lock_path(&meta)).unwrap().pid, child.id());
    // Its record rewritten as a long-dead process's: still busy.
    fs::write(
      lock_path(&meta),
      serde_json::json!({"writerId": "x", "pid": 0x7fff_fff0_u32, "hostname": host_name(), "acquiredAt": "2020-01-01T00:00:00Z"}).to_string(),
    )
    .unwrap();
    let t = Instant::now();
    assert_eq!(acquire(&meta, IMPLICIT_WAIT).unwrap_err().code(), "events_lock_busy");
    assert!(t.elapsed() >= Duration::from_millis(240), "{:?}", t.elapsed());
    child.kill().unwrap();
    child.wait().unwrap();
    // Windows frees a dead process's LockFileEx locks asynchronously: retried there for ≤ 5 s.
    let wait = if cfg!(windows) { Duration::from_secs(5) } else { Duration::ZERO };
    let l = acquire(&meta, wait).expect("the OS released the dead holder's lock");
    drop(l);
  }

  /// A holder that releases within the wait is waited for.
  #[test]
  fn a_short_hold_in_another_process_is_waited_for() {
    let dir = tempfile::tempdir().unwrap();
    let meta = dir.path().join("meta");
    let (mut child, _out) = holder(&meta, 100);
    let l = acquire(&meta, EXPLICIT_WAIT).expect("released after 100 ms");
    drop(l);
    child.wait().unwrap();
  }
}
