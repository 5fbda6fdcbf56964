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
use std::time::Duration;

use super::layout::{is_real_dir, Pointer, StoreLayout};
use super::owner::LockOwner;
use crate::util::host::host_name;

/// True when the store root holds a QMD store of the TypeScript release (`current/` or a swap
/// journal) and no store of ours is published yet.
pub fn qmd_store_pending(layout: &StoreLayout) -> bool {
  layout.pointer() == Pointer::Missing
    && (is_real_dir(&layout.dir.join("current")) || layout.dir.join("swap.json").is_file())
}

/// A marker (`index.lock/` or its `owner.json`) that cannot be read as an owner record — torn,
/// zero-filled by a crash, or not written yet — is taken for a writer in the middle of writing
/// it for this long after its last change (the TypeScript writer writes `owner.json` right after
/// its `mkdir`, in one call), then for the remnant of a crash: stale. Not fitted: ample against
/// the milliseconds between the two calls.
pub const TORN_MARKER_GRACE: Duration = Duration::from_secs(10);
/// Off Unix the holder's process cannot be probed: a foreign marker older than this (by its
/// mtime) is stale. The TypeScript release has no age-based expiry (a dead holder's lock stayed
/// until removed by hand); its writer holds the lock for one reindex, minutes on large vaults.
/// Not fitted: far above any reindex the old release ran, short enough that a crash does not
/// block our writer for good.
pub const UNCHECKED_MARKER_STALE: Duration = Duration::from_secs(6 * 3600);

/// What `index.lock/` says about who holds the store.
#[derive(Debug, Clone, PartialEq)]
pub enum Marker {
  /// No `index.lock/`.
  Absent,
  /// One of our own markers (it carries `engine`); it never decides anything, the OS lock does.
  Ours(Vec<u8>),
  /// A lock of the TypeScript release's writer that is live (its process exists on this host,
  /// or it cannot be checked and is younger than [`UNCHECKED_MARKER_STALE`]).
  Foreign(LockOwner),
  /// A TypeScript writer's lock whose holder is gone (or that expired unchecked).
  DeadForeign(LockOwner),
  /// `index.lock/` without a readable owner record (torn, zero-filled, not written yet); while
  /// fresh a writer may be writing it.
  Torn {
    /// Changed less than [`TORN_MARKER_GRACE`] ago.
    fresh: bool,
  },
}

impl Marker {
  /// Whether the marker holds the store against us.
  pub fn holds(&self) -> bool {
    matches!(self, Marker::Foreign(_) | Marker::Torn { fresh: true })
  }
}

fn age(meta: &std::fs::Metadata) -> Duration {
  meta.modified().ok().and_then(|t| t.elapsed().ok()).unwrap_or_default()
}

/// Read `index.lock/` (see [`Marker`]). A marker from another host cannot be checked and counts
/// as live (as the TypeScript writer treats it).
pub fn inspect_marker(layout: &StoreLayout) -> Marker {
  let dir = layout.lock_marker_dir();
  let file = dir.join("owner.json");
  let (bytes, meta) = match (std::fs::read(&file), std::fs::metadata(&file)) {
    (Ok(b), Ok(m)) => (b, m),
    _ => {
      return match std::fs::symlink_metadata(&dir) {
        Err(_) => Marker::Absent,
        // Created, not written yet (or the write was lost): torn.
        Ok(m) => Marker::Torn { fresh: age(&m) < TORN_MARKER_GRACE },
      };
    }
  };
  let Ok(owner) = serde_json::from_slice::<LockOwner>(&bytes) else {
    return Marker::Torn { fresh: age(&meta) < TORN_MARKER_GRACE };
  };
  if owner.engine.is_some() {
    return Marker::Ours(bytes);
  }
  if owner.hostname != host_name() {
    return Marker::Foreign(owner);
  }
  let live = if cfg!(unix) { process_alive(owner.pid) } else { age(&meta) < UNCHECKED_MARKER_STALE };
  if live {
    Marker::Foreign(owner)
  } else {
    Marker::DeadForeign(owner)
  }
}

/// The owner of a live lock of the TypeScript release's writer, if one holds the store (see
/// [`inspect_marker`]; a fresh torn marker counts, with an empty owner record).
pub fn foreign_writer(layout: &StoreLayout) -> Option<LockOwner> {
  match inspect_marker(layout) {
    Marker::Foreign(owner) => Some(owner),
    Marker::Torn { fresh: true } => {
      Some(LockOwner { pid: 0, hostname: String::new(), acquired_at: String::new(), engine: None })
    }
    _ => None,
  }
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
    assert!(foreign_writer(&layout).is_some(), "a fresh malformed lock may be being written");
    std::fs::write(layout.lock_marker_dir().join("owner.json"), b"").unwrap();
    assert!(foreign_writer(&layout).is_some(), "so may a fresh empty one");
    let old = std::time::SystemTime::now() - TORN_MARKER_GRACE - Duration::from_secs(1);
    std::fs::File::options()
      .write(true)
      .open(layout.lock_marker_dir().join("owner.json"))
      .unwrap()
      .set_modified(old)
      .unwrap();
    assert_eq!(inspect_marker(&layout), Marker::Torn { fresh: false });
    assert!(foreign_writer(&layout).is_none(), "an old torn marker is the remnant of a crash");
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
