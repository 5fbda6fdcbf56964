//! Serialization of writers. In-process: one mutex per vault root, so reindex calls of one
//! process queue up. Cross-process: the directory `index.lock/` created atomically with a
//! non-recursive mkdir, holding `owner.json = {pid, hostname, acquiredAt}`. A lock is broken only
//! when its owner file is valid, names this host, and that pid no longer exists; otherwise the
//! caller gets `qmd_index_busy`. There is no age-based expiry (a slow reindex is not a dead one).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::fsutil::{now_iso, read_json, JsonFile};

/// Content of `index.lock/owner.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LockOwner {
  pub pid: u32,
  pub hostname: String,
  pub acquired_at: String,
}

/// Holds the cross-process lock until dropped.
#[derive(Debug)]
pub struct StoreLock {
  dir: PathBuf,
}

impl Drop for StoreLock {
  fn drop(&mut self) {
    let _ = std::fs::remove_dir_all(&self.dir);
  }
}

/// This machine's host name (empty when unknown).
pub fn host_name() -> String {
  hostname::get().map(|h| h.to_string_lossy().into_owned()).unwrap_or_default()
}

/// True when a process with this pid exists on this machine.
#[cfg(unix)]
pub fn process_exists(pid: u32) -> bool {
  if pid == 0 || pid > i32::MAX as u32 {
    return false;
  }
  // kill(pid, 0) checks existence without sending a signal; EPERM means it exists.
  let r = unsafe { libc::kill(pid as libc::pid_t, 0) };
  r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Without a portable liveness check, assume the owner is alive (never break a live lock).
#[cfg(not(unix))]
pub fn process_exists(_pid: u32) -> bool {
  true
}

/// Try to take the lock directory `lock_dir`.
pub fn acquire(lock_dir: &Path) -> Result<StoreLock> {
  if let Some(parent) = lock_dir.parent() {
    std::fs::create_dir_all(parent).map_err(|e| Error::io("create directory", parent, e))?;
  }
  for _ in 0..2 {
    match std::fs::create_dir(lock_dir) {
      Ok(()) => {
        let owner = LockOwner { pid: std::process::id(), hostname: host_name(), acquired_at: now_iso() };
        let lock = StoreLock { dir: lock_dir.to_path_buf() };
        let text = serde_json::to_string(&owner).map_err(|e| Error::Index(e.to_string()))?;
        std::fs::write(lock_dir.join("owner.json"), text).map_err(|e| Error::io("write", lock_dir, e))?;
        return Ok(lock);
      }
      Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
        if owner_is_dead(lock_dir) {
          let _ = std::fs::remove_dir_all(lock_dir);
          continue;
        }
        return Err(Error::IndexBusy(lock_dir.to_path_buf()));
      }
      Err(e) => return Err(Error::io("create lock", lock_dir, e)),
    }
  }
  Err(Error::IndexBusy(lock_dir.to_path_buf()))
}

/// True when the lock is held by a process that is (or may be) running: a valid owner on another
/// host counts as alive, since its liveness cannot be checked from here.
pub fn held_by_live_owner(lock_dir: &Path) -> bool {
  match read_json::<LockOwner>(&lock_dir.join("owner.json")) {
    JsonFile::Valid(o) => o.hostname != host_name() || process_exists(o.pid),
    _ => false,
  }
}

fn owner_is_dead(lock_dir: &Path) -> bool {
  match read_json::<LockOwner>(&lock_dir.join("owner.json")) {
    JsonFile::Valid(o) => o.hostname == host_name() && !process_exists(o.pid),
    _ => false,
  }
}

/// Per-root in-process mutex: callers in one process run one at a time per vault.
pub fn vault_mutex(root: &Path) -> Arc<Mutex<()>> {
  static MAP: OnceLock<Mutex<HashMap<PathBuf, Arc<Mutex<()>>>>> = OnceLock::new();
  let key = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
  let mut map = MAP.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner());
  map.entry(key).or_default().clone()
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn busy_then_released() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("index.lock");
    let l = acquire(&dir).unwrap();
    assert_eq!(acquire(&dir).unwrap_err().code(), "qmd_index_busy");
    drop(l);
    assert!(acquire(&dir).is_ok());
  }

  #[test]
  fn stale_owner_on_this_host_is_recovered() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("index.lock");
    std::fs::create_dir(&dir).unwrap();
    // pid 0x7ffffffe is never a live process in practice.
    let owner = LockOwner { pid: 0x7fff_fffe, hostname: host_name(), acquired_at: now_iso() };
    std::fs::write(dir.join("owner.json"), serde_json::to_string(&owner).unwrap()).unwrap();
    assert!(acquire(&dir).is_ok());
  }

  #[test]
  fn foreign_host_or_corrupt_owner_stays_busy() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("index.lock");
    std::fs::create_dir(&dir).unwrap();
    let owner = LockOwner { pid: 0x7fff_fffe, hostname: "another-host".into(), acquired_at: now_iso() };
    std::fs::write(dir.join("owner.json"), serde_json::to_string(&owner).unwrap()).unwrap();
    assert!(acquire(&dir).is_err());
    std::fs::write(dir.join("owner.json"), "{corrupt").unwrap();
    assert!(acquire(&dir).is_err());
  }

  #[test]
  fn live_owner_stays_busy() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("index.lock");
    std::fs::create_dir(&dir).unwrap();
    let owner = LockOwner { pid: std::process::id(), hostname: host_name(), acquired_at: now_iso() };
    std::fs::write(dir.join("owner.json"), serde_json::to_string(&owner).unwrap()).unwrap();
    assert!(acquire(&dir).is_err());
  }
}
