//! Start-up recovery of a vault's store (the extension's `recoverQmdIndex`): under the writer
//! lock, remove what an interrupted writer left behind and check that the published store is
//! whole. It never rebuilds and never touches a store of the TypeScript release that is still
//! waiting for migration.

use serde::Serialize;

use super::layout::{is_real_dir, Pointer, StoreLayout};
use super::state::StateFile;
use super::{lock, migrate, swap};
use crate::error::Error;
use crate::fsutil::JsonFile;
use crate::vault::VaultPaths;

/// One recovery finding: `{severity, code, path, message}` (the extension's diagnostic shape).
#[cfg_attr(feature = "napi", napi_derive::napi(object))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RecoverDiagnostic {
  /// `error`, `warning` or `info`.
  #[cfg_attr(feature = "napi", napi(ts_type = "'error' | 'warning' | 'info'"))]
  pub severity: String,
  /// Stable code.
  pub code: String,
  /// File or directory it concerns.
  pub path: String,
  /// Human-readable explanation.
  pub message: String,
}

impl RecoverDiagnostic {
  fn new(severity: &str, code: &str, path: impl Into<String>, message: impl Into<String>) -> Self {
    RecoverDiagnostic {
      severity: severity.into(),
      code: code.into(),
      path: path.into(),
      message: message.into(),
    }
  }
}

/// Outcome of `recoverIndex` ([`recover_index`]): `ok` is false only when the store is busy
/// (nothing was done).
#[cfg_attr(feature = "napi", napi_derive::napi(object))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RecoverResult {
  /// False when another writer holds the store.
  pub ok: bool,
  /// What was found (empty when the store is clean).
  pub diagnostics: Vec<RecoverDiagnostic>,
}

/// Recover a vault's store after a crash: take the writer lock without waiting (busy →
/// `ok: false` with `qmd_index_busy`), collect unfinished or replaced store directories (and the
/// QMD files once our store is published), then validate what `CURRENT` names: a readable state
/// file and a lexical index. A problem is reported (`qmd_index_error`, repaired by a reindex),
/// never fixed by deleting the live store.
pub fn recover_index(paths: &VaultPaths) -> RecoverResult {
  let layout = StoreLayout::new(paths.retrieval());
  let root = layout.dir.display().to_string();
  let mut diagnostics = Vec::new();
  if !layout.dir.exists() {
    return RecoverResult { ok: true, diagnostics };
  }
  let _lock = match lock::acquire(&layout) {
    Ok(l) => l,
    Err(e @ Error::IndexBusy(_)) => {
      let mut d =
        vec![RecoverDiagnostic::new("error", "qmd_index_busy", migrate::lock_path(&layout), e.to_string())];
      if migrate::foreign_writer(&layout).is_some() && migrate::qmd_store_pending(&layout) {
        d.push(deferred(&layout));
      }
      return RecoverResult { ok: false, diagnostics: d };
    }
    Err(e) => {
      diagnostics.push(RecoverDiagnostic::new("error", e.code(), root, e.to_string()));
      return RecoverResult { ok: true, diagnostics };
    }
  };
  let kept = swap::collect_garbage(&layout);
  migrate::remove_unreferenced_qmd_staging(&layout);
  if kept > 0 {
    diagnostics.push(RecoverDiagnostic::new(
      "warning",
      "qmd_swap_interrupted",
      root.clone(),
      format!("{kept} replaced store director(y/ies) could not be removed yet; a later writer retries"),
    ));
  }
  match layout.pointer() {
    Pointer::Missing => {
      if migrate::qmd_store_pending(&layout) {
        diagnostics.push(RecoverDiagnostic::new(
          "info",
          "qmd_migration_pending",
          root,
          "A QMD store of the TypeScript release is kept readable until wiki_reindex publishes this engine's index",
        ));
      }
    }
    Pointer::Invalid(msg) => diagnostics.push(RecoverDiagnostic::new("error", "qmd_index_error", root, msg)),
    Pointer::Valid(current) => {
      let dir = current.dir.display().to_string();
      match StateFile::read(&current) {
        JsonFile::Valid(_) if is_real_dir(&current.lexical_dir()) => {}
        JsonFile::Valid(_) => diagnostics.push(RecoverDiagnostic::new(
          "error",
          "qmd_index_error",
          dir,
          "The published store has no lexical index; run wiki_reindex to rebuild it",
        )),
        JsonFile::Missing => diagnostics.push(RecoverDiagnostic::new(
          "warning",
          "qmd_index_error",
          dir,
          "The published store has no state file (a writer stopped between commit and state); the next reindex repairs it",
        )),
        JsonFile::Invalid(msg) => diagnostics.push(RecoverDiagnostic::new(
          "error",
          "qmd_index_error",
          dir,
          format!("Index state file is malformed: {msg}"),
        )),
      }
    }
  }
  RecoverResult { ok: true, diagnostics }
}

/// The `qmd_migration_deferred` diagnostic of a store held by the TypeScript release's writer.
pub fn deferred(layout: &StoreLayout) -> RecoverDiagnostic {
  RecoverDiagnostic::new(
    "warning",
    "qmd_migration_deferred",
    migrate::lock_path(layout),
    "A writer of the TypeScript release holds the QMD store; its migration waits until that lock is released",
  )
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn a_clean_or_absent_store_recovers_without_findings_and_garbage_is_collected() {
    let t = tempfile::tempdir().unwrap();
    let p = VaultPaths::new_layout(t.path());
    assert_eq!(recover_index(&p), RecoverResult { ok: true, diagnostics: vec![] });
    let layout = StoreLayout::new(p.retrieval());
    let (live, dead) = (super::super::layout::new_store_name(), super::super::layout::new_store_name());
    std::fs::create_dir_all(layout.store_dir(&live).lexical_dir()).unwrap();
    std::fs::create_dir_all(layout.store_dir(&dead).lexical_dir()).unwrap();
    layout.set_current(&live).unwrap();
    let r = recover_index(&p);
    assert!(r.ok);
    assert!(!layout.store_dir(&dead).dir.exists(), "an unfinished store directory is collected");
    assert!(layout.store_dir(&live).dir.exists(), "the live store is never removed");
    assert_eq!(r.diagnostics.len(), 1, "{r:?}");
    assert_eq!(r.diagnostics[0].code, "qmd_index_error", "no state file yet");
  }

  #[test]
  fn a_pending_qmd_store_is_left_alone_and_a_live_typescript_lock_makes_it_busy() {
    let t = tempfile::tempdir().unwrap();
    let p = VaultPaths::new_layout(t.path());
    std::fs::create_dir_all(p.qmd_current.clone()).unwrap();
    std::fs::write(p.qmd_current.join("index.sqlite"), b"SQLite format 3\0").unwrap();
    std::fs::write(&p.qmd_manifest, b"{}").unwrap();
    let r = recover_index(&p);
    assert!(r.ok);
    assert_eq!(r.diagnostics.iter().map(|d| d.code.as_str()).collect::<Vec<_>>(), ["qmd_migration_pending"]);
    assert!(p.qmd_current.join("index.sqlite").is_file() && p.qmd_manifest.is_file());

    let marker = p.qmd.join("index.lock");
    std::fs::create_dir_all(&marker).unwrap();
    let owner = serde_json::json!({"pid": std::process::id(), "hostname": crate::util::host::host_name(), "acquiredAt": "x"});
    std::fs::write(marker.join("owner.json"), owner.to_string()).unwrap();
    let r = recover_index(&p);
    assert!(!r.ok);
    let codes: Vec<&str> = r.diagnostics.iter().map(|d| d.code.as_str()).collect();
    assert_eq!(codes, ["qmd_index_busy", "qmd_migration_deferred"]);
    assert!(marker.join("owner.json").is_file(), "a lock we do not own is never removed");
  }

  /// A torn or zero-filled TypeScript marker (a crash before its write reached the disk) is not
  /// a live lock forever: once past its grace, `recoverIndex` takes the store and clears it.
  #[test]
  fn recover_clears_a_torn_marker() {
    let t = tempfile::tempdir().unwrap();
    let p = VaultPaths::new_layout(t.path());
    std::fs::create_dir_all(p.qmd_current.clone()).unwrap();
    std::fs::write(p.qmd_current.join("index.sqlite"), b"SQLite format 3\0").unwrap();
    let marker = p.qmd.join("index.lock");
    std::fs::create_dir_all(&marker).unwrap();
    std::fs::write(marker.join("owner.json"), [0u8; 48]).unwrap();
    let old = std::time::SystemTime::now() - migrate::TORN_MARKER_GRACE - std::time::Duration::from_secs(1);
    std::fs::File::options().write(true).open(marker.join("owner.json")).unwrap().set_modified(old).unwrap();
    let r = recover_index(&p);
    assert!(r.ok, "{r:?}");
    assert!(!marker.exists(), "the torn marker is cleared");
    assert!(lock::acquire(&StoreLayout::new(p.retrieval())).is_ok());
  }
}
