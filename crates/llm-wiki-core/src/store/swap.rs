//! Publishing a fully built store directory, and collecting the ones nobody needs any more.
//!
//! A full rebuild writes `store-<uuid>/` completely (committed, state written, validated) and
//! then replaces `CURRENT` — one atomic rename. A crash before it leaves the old store live and an
//! unfinished directory behind; a crash after it leaves the new store live and the old directory
//! behind. Readers only ever follow `CURRENT`, so they see the old store or the new one, whole.
//! The recovery rule is the same for every moment: once `CURRENT` names a store, every other
//! store directory (and any format-1 leftover) is garbage, removed by the next writer under the
//! lock. Removal is best effort: a directory another process still has mapped cannot be deleted
//! on Windows and is retried by a later writer.

use std::path::Path;

use super::layout::{is_real_dir, Pointer, StoreLayout};
use crate::error::Result;

/// Test hooks: `LLM_WIKI_CRASH_AT=<point>` kills the process (SIGKILL on Unix) at that point, so
/// tests can prove recovery from a kill at every phase; `LLM_WIKI_PAUSE_AT=<point>` stops there
/// until stdin closes, so a test can hold a real writer (and its lock) in another process.
/// Compiled in only with the `test-hooks` feature (test builds); everywhere else the variables are
/// never read.
#[cfg(feature = "test-hooks")]
pub fn crash_point(point: &str) {
  if std::env::var("LLM_WIKI_PAUSE_AT").is_ok_and(|v| v == point) {
    eprintln!("LLM_WIKI_PAUSE_AT={point}: paused until stdin closes");
    let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut Vec::new());
  }
  if std::env::var("LLM_WIKI_CRASH_AT").is_ok_and(|v| v == point) {
    eprintln!("LLM_WIKI_CRASH_AT={point}: killing the process");
    #[cfg(unix)]
    unsafe {
      libc::kill(libc::getpid(), libc::SIGKILL);
    }
    std::process::abort();
  }
}

/// Without the `test-hooks` feature a crash point does nothing.
#[cfg(not(feature = "test-hooks"))]
#[inline(always)]
pub fn crash_point(_point: &str) {}

/// Test hook: `LLM_WIKI_FAULT_AT=<fault>` injects the named fault where the engine asks for it
/// (`staged-manifest-short`: a full rebuild's staged manifest loses a page just before the staged
/// store is validated, see `reindex`). Compiled in only with the `test-hooks` feature; everywhere
/// else no fault is ever injected and the variable is never read.
#[cfg(feature = "test-hooks")]
pub fn fault_point(fault: &str) -> bool {
  std::env::var("LLM_WIKI_FAULT_AT").is_ok_and(|v| v == fault)
}

/// Publish the built store directory `name` as the live store, then remove the old one. Must run
/// with the store lock held, after `name` validated.
pub fn promote(layout: &StoreLayout, name: &str) -> Result<()> {
  layout.set_current(name)?;
  crash_point("after-swap");
  collect_garbage(layout);
  let _ = std::fs::remove_file(layout.last_error_file());
  Ok(())
}

/// Remove every store directory `CURRENT` does not name, and the format-1 layout, once `CURRENT`
/// names a store (before that, nothing is removed: a format-1 store still reports its state).
/// Must run with the store lock held. Returns how many leftovers could not be removed yet.
pub fn collect_garbage(layout: &StoreLayout) -> usize {
  let Pointer::Valid(current) = layout.pointer() else {
    return 0;
  };
  let mut kept = 0;
  let current_name = current.name();
  let leftovers = layout
    .store_dirs()
    .into_iter()
    .filter(|n| *n != current_name)
    .map(|n| layout.store_dir(&n).dir)
    .chain(layout.legacy_entries());
  for path in leftovers {
    if remove(&path).is_err() {
      kept += 1;
    }
  }
  kept
}

fn remove(path: &Path) -> std::io::Result<()> {
  let r = if is_real_dir(path) { std::fs::remove_dir_all(path) } else { std::fs::remove_file(path) };
  match r {
    Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
    _ => Ok(()),
  }
}

#[cfg(test)]
mod tests {
  use super::*;
  use crate::store::layout::new_store_name;

  #[test]
  fn everything_but_the_current_store_is_collected_once_one_is_published() {
    let t = tempfile::tempdir().unwrap();
    let layout = StoreLayout::new(t.path());
    let (a, b) = (new_store_name(), new_store_name());
    for name in [&a, &b] {
      std::fs::create_dir_all(layout.store_dir(name).lexical_dir()).unwrap();
    }
    std::fs::create_dir_all(t.path().join("current/lexical")).unwrap();
    std::fs::write(t.path().join("swap.json"), "{}").unwrap();
    // No CURRENT yet: nothing is removed.
    assert_eq!(collect_garbage(&layout), 0);
    assert_eq!(layout.store_dirs().len(), 2);
    assert!(t.path().join("current").exists());
    promote(&layout, &b).unwrap();
    assert_eq!(layout.store_dirs(), vec![b.clone()]);
    assert!(layout.legacy_entries().is_empty());
    assert_eq!(layout.current().unwrap().name(), b);
  }
}
