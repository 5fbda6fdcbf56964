//! The one-writer lock of a store: an exclusive OS advisory lock on `writer.lock` (`flock` on
//! Unix, `LockFileEx` on Windows, through `std::fs::File::try_lock`), taken without waiting. The
//! OS releases it when the holder's file handle closes, including when the process dies, so
//! there is no stale lock to detect or break. A process-wide set of held lock files makes a
//! second attempt from this process busy too, whatever the platform's lock granularity.
//!
//! `index.lock/owner.json = {pid, hostname, acquiredAt}` is written after the OS lock is held and
//! removed before it is released: it tells a human who is writing. Our own markers (they carry
//! `engine`) are never read to decide anything (a crash leaves one behind; the next holder
//! overwrites it). A marker *without* `engine` is the lock of the TypeScript release's QMD writer
//! (the same directory and fields, its only lock): while its process is alive the store is busy
//! for us too (see `migrate::foreign_writer`), so the two writers never interleave.

use std::collections::HashSet;
use std::fs::{File, OpenOptions, TryLockError};
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

use super::layout::StoreLayout;
pub use super::owner::LockOwner;
use crate::error::{Error, Result};
use crate::fsutil::now_iso;
use crate::util::host::host_name;

/// Holds the store's writer lock until dropped.
#[derive(Debug)]
pub struct StoreLock {
  /// The locked file; closing it releases the OS lock.
  file: Option<File>,
  /// Canonical path of the lock file (key of the in-process set).
  key: PathBuf,
  marker: PathBuf,
}

impl Drop for StoreLock {
  fn drop(&mut self) {
    // The marker goes while the lock is still held, so it never removes a later holder's.
    let _ = std::fs::remove_dir_all(&self.marker);
    drop(self.file.take());
    held().lock().unwrap_or_else(|p| p.into_inner()).remove(&self.key);
  }
}

/// Lock files held by this process.
fn held() -> &'static Mutex<HashSet<PathBuf>> {
  static HELD: OnceLock<Mutex<HashSet<PathBuf>>> = OnceLock::new();
  HELD.get_or_init(Default::default)
}

/// Take the writer lock of a store without waiting: `Err(IndexBusy)` when another process or
/// another call of this process holds it.
pub fn acquire(layout: &StoreLayout) -> Result<StoreLock> {
  std::fs::create_dir_all(&layout.dir).map_err(|e| Error::io("create directory", &layout.dir, e))?;
  let path = layout.lock_file();
  let busy = || Error::IndexBusy(layout.dir.clone());
  let file = OpenOptions::new()
    .read(true)
    .write(true)
    .create(true)
    .truncate(false)
    .open(&path)
    .map_err(|e| Error::io("open lock file", &path, e))?;
  let key = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
  if !held().lock().unwrap_or_else(|p| p.into_inner()).insert(key.clone()) {
    return Err(busy());
  }
  if let Err(e) = file.try_lock() {
    held().lock().unwrap_or_else(|p| p.into_inner()).remove(&key);
    return Err(match e {
      TryLockError::WouldBlock => busy(),
      TryLockError::Error(e) => Error::io("lock", &path, e),
    });
  }
  // A live writer of the TypeScript release holds the store through its marker alone.
  if super::migrate::foreign_writer(layout).is_some() {
    drop(file);
    held().lock().unwrap_or_else(|p| p.into_inner()).remove(&key);
    return Err(busy());
  }
  let lock = StoreLock { file: Some(file), key, marker: layout.lock_marker_dir() };
  let owner = LockOwner {
    pid: std::process::id(),
    hostname: host_name(),
    acquired_at: now_iso(),
    engine: Some(super::layout::ENGINE_NAME.to_string()),
  };
  // The marker is informational: it is written without fsync (it costs a no-op reindex nothing
  // measurable), and failing to write it does not fail the lock.
  if let Ok(json) = serde_json::to_vec(&owner) {
    let _ = std::fs::create_dir_all(&lock.marker)
      .and_then(|_| std::fs::write(lock.marker.join("owner.json"), json));
  }
  Ok(lock)
}

#[cfg(test)]
mod tests {
  use super::super::layout::ENGINE_NAME;
  use super::*;
  use std::io::{BufRead, BufReader};
  use std::process::{Command, Stdio};

  fn layout() -> (tempfile::TempDir, StoreLayout) {
    let t = tempfile::tempdir().unwrap();
    let l = StoreLayout::new(t.path().join("retrieval"));
    (t, l)
  }

  fn owner(l: &StoreLayout) -> LockOwner {
    serde_json::from_slice(&std::fs::read(l.lock_marker_dir().join("owner.json")).unwrap()).unwrap()
  }

  #[test]
  fn busy_then_released() {
    let (_t, l) = layout();
    let a = acquire(&l).unwrap();
    assert_eq!(owner(&l).pid, std::process::id());
    assert_eq!(acquire(&l).unwrap_err().code(), "qmd_index_busy");
    drop(a);
    assert!(!l.lock_marker_dir().exists(), "the marker goes with the lock");
    assert!(acquire(&l).is_ok());
  }

  #[test]
  fn threads_never_hold_it_together() {
    let (_t, l) = layout();
    let inside = std::sync::atomic::AtomicUsize::new(0);
    let taken = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
      for _ in 0..4 {
        s.spawn(|| {
          for _ in 0..200 {
            if let Ok(lock) = acquire(&l) {
              assert_eq!(inside.fetch_add(1, std::sync::atomic::Ordering::SeqCst), 0, "two holders at once");
              taken.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
              inside.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
              drop(lock);
            }
          }
        });
      }
    });
    assert!(taken.load(std::sync::atomic::Ordering::SeqCst) > 0);
  }

  #[test]
  fn the_marker_is_never_trusted_and_drop_never_removes_a_later_holders_lock() {
    let (_t, l) = layout();
    let a = acquire(&l).unwrap();
    // Someone rewrites or removes the marker (a crash leftover, a human, a pid namespace in which
    // the holder looks dead): the lock is still held.
    let dead = LockOwner {
      pid: 0x7fff_fffe,
      hostname: host_name(),
      acquired_at: now_iso(),
      engine: Some(ENGINE_NAME.into()),
    };
    crate::fsutil::write_json(&l.lock_marker_dir().join("owner.json"), &dead).unwrap();
    assert_eq!(acquire(&l).unwrap_err().code(), "qmd_index_busy");
    std::fs::remove_dir_all(l.lock_marker_dir()).unwrap();
    assert_eq!(acquire(&l).unwrap_err().code(), "qmd_index_busy");
    drop(a);
    let b = acquire(&l).unwrap();
    assert_eq!(acquire(&l).unwrap_err().code(), "qmd_index_busy", "b still holds the lock");
    assert_eq!(owner(&l).pid, std::process::id());
    drop(b);
  }

  #[test]
  fn a_stale_marker_left_by_a_crash_does_not_block() {
    let (_t, l) = layout();
    std::fs::create_dir_all(l.lock_marker_dir()).unwrap();
    // Ours (a crash leaves the whole record: it is one small write) or empty (killed between
    // creating and writing it). A corrupt marker without our `engine` is a TypeScript writer's
    // and blocks (see `migrate::foreign_writer`).
    let ours = serde_json::json!({"pid": 0x7fff_fffe_u32, "hostname": host_name(), "acquiredAt": "x", "engine": ENGINE_NAME});
    std::fs::write(l.lock_marker_dir().join("owner.json"), ours.to_string()).unwrap();
    let a = acquire(&l).unwrap();
    assert_eq!(owner(&l).pid, std::process::id(), "the new holder rewrites the marker");
    drop(a);
    std::fs::create_dir_all(l.lock_marker_dir()).unwrap();
    std::fs::write(l.lock_marker_dir().join("owner.json"), "").unwrap();
    let a = acquire(&l).unwrap();
    assert_eq!(owner(&l).pid, std::process::id(), "the new holder rewrites the marker");
    drop(a);
  }

  /// Child side of `a_lock_whose_holder_was_killed_is_free_at_once` (run only through it).
  #[test]
  #[ignore]
  fn lock_holder_child() {
    let Some(dir) = std::env::var_os("LLM_WIKI_TEST_LOCK_DIR") else { return };
    let _lock = acquire(&StoreLayout::new(PathBuf::from(dir))).unwrap();
    println!("held");
    // Hold the lock until killed.
    loop {
      std::thread::park();
    }
  }

  #[test]
  fn a_lock_whose_holder_was_killed_is_free_at_once() {
    let (_t, l) = layout();
    let mut child = Command::new(std::env::current_exe().unwrap())
      .args([
        "--exact",
        "store::lock::tests::lock_holder_child",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
      ])
      .env("LLM_WIKI_TEST_LOCK_DIR", &l.dir)
      .stdout(Stdio::piped())
      .stderr(Stdio::null())
      .spawn()
      .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("held") {
      line.clear();
      assert!(out.read_line(&mut line).unwrap() > 0, "the child exited before taking the lock");
    }
    assert_eq!(acquire(&l).unwrap_err().code(), "qmd_index_busy", "held by the child");
    assert_eq!(owner(&l).pid, child.id());
    // SIGKILL on Unix (TerminateProcess on Windows): no destructor runs in the child.
    child.kill().unwrap();
    child.wait().unwrap();
    // Windows frees a dead process's LockFileEx locks asynchronously ("depends upon available
    // system resources"): only there is a busy answer retried, for at most 5 s.
    let mut attempt = acquire(&l);
    if cfg!(windows) {
      let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
      while attempt.is_err() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
        attempt = acquire(&l);
      }
    }
    let lock = attempt.expect("the OS released the dead holder's lock");
    assert_eq!(owner(&l).pid, std::process::id());
    drop(lock);
  }
}
