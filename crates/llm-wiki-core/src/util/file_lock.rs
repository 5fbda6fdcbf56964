//! A short exclusive OS lock on a small lock file, waited for up to a bound: the writers of the
//! per-vault session ledger and of the tool-call audit hold one for the length of an append or a
//! compaction. The OS frees it when its holder exits, so a crash never leaves it taken.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::Path;
use std::time::{Duration, Instant};

/// An exclusive lock on a file, released when dropped.
pub struct HeldLock(File);

impl Drop for HeldLock {
  fn drop(&mut self) {
    let _ = self.0.unlock();
  }
}

/// Open a lock file for reading and writing, created when missing and never truncated: a holder
/// may have written its record into it. Every lock of the crate opens its file this way.
pub fn open_lock_file(path: &Path) -> std::io::Result<File> {
  OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path)
}

/// Lock `file` (created with its folder when missing; its content is never read or written),
/// retrying every 2 ms for up to `wait`. `Err` says why: busy for the whole wait, or the error.
pub fn lock_within(file: &Path, wait: Duration) -> Result<HeldLock, String> {
  if let Some(dir) = file.parent() {
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
  }
  let f = open_lock_file(file).map_err(|e| e.to_string())?;
  let start = Instant::now();
  loop {
    match f.try_lock() {
      Ok(()) => return Ok(HeldLock(f)),
      Err(TryLockError::WouldBlock) if start.elapsed() < wait => std::thread::sleep(Duration::from_millis(2)),
      Err(TryLockError::WouldBlock) => return Err(format!("busy for {} ms", wait.as_millis())),
      Err(TryLockError::Error(e)) => return Err(e.to_string()),
    }
  }
}
