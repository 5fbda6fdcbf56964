//! Migration from the TypeScript release's QMD store, which lives in the same directory
//! (`paths.qmd`, `<meta>/qmd` by default) with this layout (pi-llm-wiki `lib/qmd-indexing.ts`):
//!
//! ```text
//! <meta>/qmd/
//!   index.lock/owner.json   {pid, hostname, acquiredAt}: the QMD writer's only lock (mkdir)
//!   swap.json               write-ahead journal of a promotion in progress
//!   manifest.json           page mirror manifest; documents/ holds the mirrored pages
//!   current/                index.sqlite + index-state.json (the live QMD store)
//!   previous/, staging-<uuid>/
//!   last-error.json         {code, message, manifestHash, at} (same shape as ours)
//! ```
//!
//! The rules: while no `CURRENT` names a store of ours, the QMD files are never touched (the old
//! release keeps reading them; our status reports the vault `stale` with a `qmd_migration_pending`
//! issue). A reindex builds our store beside them and publishes it by replacing `CURRENT`, one
//! atomic rename; only then are the QMD files garbage, removed under our lock by
//! `swap::collect_garbage`. While a live QMD writer holds `index.lock`, our writer is busy
//! (`qmd_index_busy`) and the migration is deferred (`qmd_migration_deferred`): the two writers
//! never run at once, and a lock we do not own is never removed.

use std::path::Path;

use super::layout::{is_real_dir, Pointer, StoreLayout};
use super::owner::LockOwner;
use crate::util::host::host_name;

/// True when the store root holds a QMD store of the TypeScript release (`current/` or a swap
/// journal) and no store of ours is published yet.
pub fn qmd_store_pending(layout: &StoreLayout) -> bool {
  layout.pointer() == Pointer::Missing
    && (is_real_dir(&layout.dir.join("current")) || layout.dir.join("swap.json").is_file())
}

/// The owner of a live lock of the TypeScript release's writer, if one holds the store: a marker
/// `index.lock/owner.json` without our `engine` field whose process is alive on this host. A
/// marker from another host cannot be checked and counts as live (as the TypeScript writer
/// treats it). Off Unix a process cannot be probed here, so such a marker counts as live too.
///
/// A non-empty marker that is not a valid owner record is not ours (ours are written whole in
/// one small write) and cannot be checked: it counts as live, so it is never broken (the
/// TypeScript writer never breaks one either). An empty one is the remnant of our own writer
/// killed between creating and writing it.
pub fn foreign_writer(layout: &StoreLayout) -> Option<LockOwner> {
  let bytes = std::fs::read(layout.lock_marker_dir().join("owner.json")).ok()?;
  if bytes.iter().all(u8::is_ascii_whitespace) {
    return None;
  }
  let Ok(owner) = serde_json::from_slice::<LockOwner>(&bytes) else {
    return Some(LockOwner { pid: 0, hostname: String::new(), acquired_at: String::new(), engine: None });
  };
  if owner.engine.is_some() {
    return None;
  }
  if owner.hostname != host_name() {
    return Some(owner);
  }
  process_alive(owner.pid).then_some(owner)
}

/// True when a local process with `pid` exists (always true where this cannot be checked).
#[cfg(unix)]
pub(crate) fn process_alive(pid: u32) -> bool {
  let Ok(pid) = libc::pid_t::try_from(pid) else {
    return false;
  };
  if pid <= 0 {
    return false;
  }
  // SAFETY: signal 0 only checks that the process exists and may be signalled.
  let r = unsafe { libc::kill(pid, 0) };
  r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// True when a local process with `pid` exists (always true where this cannot be checked).
#[cfg(not(unix))]
pub(crate) fn process_alive(_pid: u32) -> bool {
  true
}

/// Human-readable location of the QMD lock (for diagnostics).
pub fn lock_path(layout: &StoreLayout) -> String {
  layout.lock_marker_dir().display().to_string()
}

/// True when `dir` holds the QMD store's live database (`current/index.sqlite`).
pub fn has_qmd_database(dir: &Path) -> bool {
  dir.join("current").join("index.sqlite").is_file()
}

/// Remove the QMD writer's `staging-<uuid>/` directories when no swap journal references any:
/// by the TypeScript release's own rule they are leftovers of a failed or cancelled run. Must run
/// under our lock with no live QMD writer. With a journal (valid or not) nothing is touched: the
/// old release's recovery owns it, and our published store makes it garbage later. Returns the
/// number removed.
pub fn remove_unreferenced_qmd_staging(layout: &StoreLayout) -> usize {
  if layout.dir.join("swap.json").exists() {
    return 0;
  }
  let names: Vec<String> = std::fs::read_dir(&layout.dir)
    .into_iter()
    .flatten()
    .flatten()
    .filter(|e| e.file_type().map(|t| t.is_dir()).unwrap_or(false))
    .map(|e| e.file_name().to_string_lossy().into_owned())
    .filter(|n| n.starts_with("staging-") && super::layout::is_legacy_entry_name(n))
    .collect();
  names.iter().filter(|n| std::fs::remove_dir_all(layout.dir.join(n)).is_ok()).count()
}

#[cfg(test)]
mod tests {
  use super::*;

  fn marker(layout: &StoreLayout, json: serde_json::Value) {
    std::fs::create_dir_all(layout.lock_marker_dir()).unwrap();
    std::fs::write(layout.lock_marker_dir().join("owner.json"), json.to_string()).unwrap();
  }

  #[test]
  fn a_live_typescript_lock_is_foreign_ours_and_dead_ones_are_not() {
    let t = tempfile::tempdir().unwrap();
    let layout = StoreLayout::new(t.path());
    assert!(foreign_writer(&layout).is_none());
    let me = std::process::id();
    marker(&layout, serde_json::json!({"pid": me, "hostname": host_name(), "acquiredAt": "x"}));
    assert_eq!(foreign_writer(&layout).map(|o| o.pid), Some(me));
    marker(&layout, serde_json::json!({"pid": me, "hostname": "elsewhere.invalid", "acquiredAt": "x"}));
    assert!(foreign_writer(&layout).is_some(), "another host's lock cannot be checked: busy");
    marker(
      &layout,
      serde_json::json!({"pid": me, "hostname": host_name(), "acquiredAt": "x", "engine": "llm-wiki-retrieval"}),
    );
    assert!(foreign_writer(&layout).is_none(), "our own marker never decides anything");
    marker(&layout, serde_json::json!("{not-json"));
    assert!(foreign_writer(&layout).is_some(), "a malformed lock is never broken");
    std::fs::write(layout.lock_marker_dir().join("owner.json"), b"").unwrap();
    assert!(foreign_writer(&layout).is_none(), "an empty marker is a remnant of ours");
    #[cfg(unix)]
    {
      // A process that has exited (its pid reaped) is not alive.
      let mut child = std::process::Command::new("true").spawn().unwrap();
      let pid = child.id();
      child.wait().unwrap();
      marker(&layout, serde_json::json!({"pid": pid, "hostname": host_name(), "acquiredAt": "x"}));
      assert!(foreign_writer(&layout).is_none());
    }
  }

  #[test]
  fn a_qmd_store_is_pending_until_current_names_ours() {
    let t = tempfile::tempdir().unwrap();
    let layout = StoreLayout::new(t.path());
    assert!(!qmd_store_pending(&layout));
    std::fs::create_dir_all(t.path().join("current")).unwrap();
    std::fs::write(t.path().join("current/index.sqlite"), b"SQLite format 3\0").unwrap();
    assert!(qmd_store_pending(&layout));
    assert!(has_qmd_database(t.path()));
    layout.set_current(&super::super::layout::new_store_name()).unwrap();
    assert!(!qmd_store_pending(&layout));
  }
}
