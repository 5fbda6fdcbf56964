//! The one-writer lock of a store: an exclusive OS advisory lock on `writer.lock` (`flock` on
//! Unix, `LockFileEx` on Windows, through `std::fs::File::try_lock`), taken without waiting. The
//! OS releases it when the holder's file handle closes, including when the process dies, so
//! there is no stale lock to detect or break. A process-wide set of held lock files makes a
//! second attempt from this process busy too, whatever the platform's lock granularity.
//!
//! `index.lock/owner.json = {pid, hostname, acquiredAt, engine}` is the TypeScript release's QMD
//! writer's lock (the same directory and fields, its only lock, taken by a non-recursive `mkdir`),
//! so after the OS lock is held we take it the same way: `mkdir index.lock` (atomic: a TypeScript
//! writer arriving at the same moment gets `EEXIST`, or we do), then `owner.json` created with
//! `O_EXCL` and synced with its folder. If `index.lock/` exists we look at it
//! (`migrate::inspect_marker`): a live TypeScript writer (or a torn marker younger than a few
//! seconds, which may be one writing) makes the store busy; our own crash leftover, a dead
//! TypeScript writer's lock, or an old torn or zero-filled marker is removed and taken over. A
//! marker is never overwritten, and our Drop removes it only while it still holds the bytes we
//! wrote, so a TypeScript writer's lock is never deleted by us.

use std::collections::HashSet;
use std::fs::{File, OpenOptions, TryLockError};
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

use super::layout::StoreLayout;
pub use super::owner::LockOwner;
use crate::error::{Error, Result};
use crate::fsutil::now_iso;
use crate::util::file_lock::open_lock_file;
use crate::util::host::host_name;

/// Holds the store's writer lock until dropped.
#[derive(Debug)]
pub struct StoreLock {
  /// The locked file; closing it releases the OS lock.
  file: Option<File>,
  /// Canonical path of the lock file (key of the in-process set).
  key: PathBuf,
  marker: PathBuf,
  /// The bytes of the `owner.json` we created (none when the marker could not be written).
  written: Option<Vec<u8>>,
}

impl Drop for StoreLock {
  fn drop(&mut self) {
    // The marker goes while the lock is still held, and only while it is the one we wrote: a
    // marker someone else put there (a TypeScript writer that broke ours) is left alone.
    if let Some(ours) = &self.written {
      if std::fs::read(self.marker.join("owner.json")).is_ok_and(|b| &b == ours) {
        let _ = std::fs::remove_dir_all(&self.marker);
      }
    }
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
  let file = open_lock_file(&path).map_err(|e| Error::io("open lock file", &path, e))?;
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
  let mut lock = StoreLock { file: Some(file), key, marker: layout.lock_marker_dir(), written: None };
  #[cfg(test)]
  tests::before_marker(layout);
  // A live writer of the TypeScript release holds the store through its marker alone.
  lock.written = Some(take_marker(layout).map_err(|e| match e {
    MarkerError::Held => busy(),
    MarkerError::Io(e) => Error::io("create lock marker", layout.lock_marker_dir(), e),
  })?);
  Ok(lock)
}

enum MarkerError {
  /// A live TypeScript writer (or one writing its marker) holds `index.lock/`.
  Held,
  Io(std::io::Error),
}

/// Take `index.lock/` the TypeScript writer's way (see the module doc): `mkdir`, then an
/// exclusive create of `owner.json`, synced. A leftover that holds nothing (ours, a dead
/// writer's, an old torn one) is removed and the take retried. Returns the bytes written.
fn take_marker(layout: &StoreLayout) -> std::result::Result<Vec<u8>, MarkerError> {
  use super::migrate::{inspect_marker, Marker};
  let dir = layout.lock_marker_dir();
  let owner = LockOwner {
    pid: std::process::id(),
    hostname: host_name(),
    acquired_at: now_iso(),
    engine: Some(super::layout::ENGINE_NAME.to_string()),
  };
  let json = serde_json::to_vec(&owner).map_err(|e| MarkerError::Io(std::io::Error::other(e)))?;
  // Each retry follows the removal of a leftover; a writer that keeps re-creating one wins.
  for _ in 0..3 {
    match std::fs::create_dir(&dir) {
      Ok(()) => {
        return match write_marker(&dir, &json) {
          Ok(()) => Ok(json),
          Err(e) => {
            let _ = std::fs::remove_dir_all(&dir);
            Err(MarkerError::Io(e))
          }
        }
      }
      Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
        let found = inspect_marker(layout);
        if found.holds() {
          return Err(MarkerError::Held);
        }
        if found != Marker::Absent {
          std::fs::remove_dir_all(&dir).or_else(ignore_not_found).map_err(MarkerError::Io)?;
        }
      }
      Err(e) => return Err(MarkerError::Io(e)),
    }
  }
  Err(MarkerError::Held)
}

fn ignore_not_found(e: std::io::Error) -> std::io::Result<()> {
  if e.kind() == std::io::ErrorKind::NotFound {
    Ok(())
  } else {
    Err(e)
  }
}

/// `owner.json` in the folder we just created: exclusive create (never over a file someone else
/// put there), file and folder synced so a crash leaves the whole record or none.
fn write_marker(dir: &std::path::Path, json: &[u8]) -> std::io::Result<()> {
  use std::io::Write;
  let path = dir.join("owner.json");
  let mut f = OpenOptions::new().write(true).create_new(true).open(&path)?;
  f.write_all(json)?;
  f.sync_all()?;
  crate::fsutil::sync_dir(dir);
  Ok(())
}

#[cfg(test)]
mod tests {
  use super::super::layout::ENGINE_NAME;
  use super::*;

  type Hook = Box<dyn Fn(&StoreLayout)>;

  thread_local! {
    /// Runs in `acquire` between the OS lock and the marker handshake (this thread's calls).
    static BEFORE_MARKER: std::cell::RefCell<Option<Hook>> = const { std::cell::RefCell::new(None) };
  }

  pub(super) fn before_marker(layout: &StoreLayout) {
    BEFORE_MARKER.with(|h| {
      if let Some(f) = h.borrow().as_ref() {
        f(layout)
      }
    });
  }

  fn ts_marker(l: &StoreLayout, pid: u32) -> Vec<u8> {
    let json = serde_json::json!({"pid": pid, "hostname": host_name(), "acquiredAt": now_iso()}).to_string();
    std::fs::create_dir_all(l.lock_marker_dir()).unwrap();
    std::fs::write(l.lock_marker_dir().join("owner.json"), &json).unwrap();
    json.into_bytes()
  }

  fn age_marker(l: &StoreLayout, by: std::time::Duration) {
    let old = std::time::SystemTime::now() - by;
    let f = l.lock_marker_dir().join("owner.json");
    if f.exists() {
      File::options().write(true).open(&f).unwrap().set_modified(old).unwrap();
    }
    File::open(l.lock_marker_dir()).unwrap().set_modified(old).unwrap();
  }

  /// The TypeScript writer takes `index.lock/` between our look at it and our marker: it is
  /// never overwritten, we are busy, and it is still there afterwards.
  #[test]
  fn a_typescript_writer_arriving_before_our_marker_is_never_overwritten() {
    let (_t, l) = layout();
    let theirs = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let t2 = theirs.clone();
    BEFORE_MARKER.with(|h| {
      *h.borrow_mut() =
        Some(Box::new(move |l: &StoreLayout| *t2.lock().unwrap() = ts_marker(l, std::process::id())))
    });
    let r = acquire(&l);
    BEFORE_MARKER.with(|h| *h.borrow_mut() = None);
    assert_eq!(r.unwrap_err().code(), "qmd_index_busy");
    assert_eq!(std::fs::read(l.lock_marker_dir().join("owner.json")).unwrap(), *theirs.lock().unwrap());
    // Its writer is gone: the lock is ours again.
    std::fs::remove_dir_all(l.lock_marker_dir()).unwrap();
    let a = acquire(&l).unwrap();
    assert_eq!(owner(&l).pid, std::process::id());
    drop(a);
  }

  /// Our Drop removes only the marker we wrote.
  #[test]
  fn drop_leaves_a_marker_that_is_not_ours() {
    let (_t, l) = layout();
    let a = acquire(&l).unwrap();
    let theirs = ts_marker(&l, std::process::id());
    drop(a);
    assert_eq!(std::fs::read(l.lock_marker_dir().join("owner.json")).unwrap(), theirs);
  }

  /// A torn or zero-filled marker (a crash before its write reached the disk) holds the store
  /// only for a short grace (a writer may be writing it), then it is stale and taken over.
  #[test]
  fn a_torn_or_zero_filled_marker_is_stale_after_its_grace() {
    let (_t, l) = layout();
    for content in [&b"{\"pid\": 12"[..], &[0u8; 64][..], &b""[..]] {
      std::fs::create_dir_all(l.lock_marker_dir()).unwrap();
      std::fs::write(l.lock_marker_dir().join("owner.json"), content).unwrap();
      assert_eq!(acquire(&l).unwrap_err().code(), "qmd_index_busy", "fresh: may be being written");
      age_marker(&l, super::super::migrate::TORN_MARKER_GRACE + std::time::Duration::from_secs(1));
      let a = acquire(&l).expect("an old torn marker is stale");
      assert_eq!(owner(&l).pid, std::process::id());
      drop(a);
      assert!(!l.lock_marker_dir().exists());
    }
    // A folder without owner.json (killed between mkdir and the write): the same.
    std::fs::create_dir_all(l.lock_marker_dir()).unwrap();
    assert_eq!(acquire(&l).unwrap_err().code(), "qmd_index_busy");
    age_marker(&l, super::super::migrate::TORN_MARKER_GRACE + std::time::Duration::from_secs(1));
    drop(acquire(&l).unwrap());
  }

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
    age_marker(&l, super::super::migrate::TORN_MARKER_GRACE + std::time::Duration::from_secs(1));
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
    let (mut child, _out) = crate::testkit::spawn_holder(
      "store::lock::tests::lock_holder_child",
      &[("LLM_WIKI_TEST_LOCK_DIR", l.dir.as_os_str())],
    );
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
