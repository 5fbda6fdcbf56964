//! Journaled swap of a fully built `staging-<uuid>/` directory into `current/`, and recovery of
//! an interrupted swap. The journal (`swap.json`) is published before each rename:
//! `prepared` → `previous-moved` (current → previous) → `current-promoted` (staging → current)
//! → `validated`, then previous, journal and last-error are removed.
//!
//! Recovery is one rule for every phase: keep `current/` if it validates; otherwise restore
//! `previous/` if there is one; remove every staging directory; delete the journal.

use serde::{Deserialize, Serialize};

use super::layout::{is_real_dir, is_staging_name, GenDir, StoreLayout};
use super::IndexIssue;
use crate::error::{Error, Result};
use crate::fsutil::{now_iso, read_json, remove_dir_all_if_exists, sync_dir, write_json, JsonFile};

/// Phases of a swap, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SwapPhase {
  Prepared,
  PreviousMoved,
  CurrentPromoted,
  Validated,
}

impl SwapPhase {
  pub fn as_str(self) -> &'static str {
    match self {
      SwapPhase::Prepared => "prepared",
      SwapPhase::PreviousMoved => "previous-moved",
      SwapPhase::CurrentPromoted => "current-promoted",
      SwapPhase::Validated => "validated",
    }
  }
}

/// Content of `swap.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SwapJournal {
  pub version: u32,
  pub operation_id: String,
  pub staging_name: String,
  pub phase: SwapPhase,
  pub started_at: String,
}

/// Read the journal: `Missing`, `Invalid` (malformed) or a journal that passed validation.
pub fn read_journal(layout: &StoreLayout) -> JsonFile<SwapJournal> {
  match read_json::<SwapJournal>(&layout.swap_file()) {
    JsonFile::Valid(j) if j.version != 1 || !is_staging_name(&j.staging_name) => {
      JsonFile::Invalid("swap journal has an unknown version or staging name".into())
    }
    other => other,
  }
}

/// Test hook: `LLM_WIKI_CRASH_AT=<point>` kills the process (SIGKILL on Unix) at that point, so
/// tests can prove recovery from a kill at every phase. Compiled in only with the `test-hooks`
/// feature (test builds); everywhere else the variable is never read.
#[cfg(feature = "test-hooks")]
pub fn crash_point(point: &str) {
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

fn rename(from: &std::path::Path, to: &std::path::Path) -> Result<()> {
  std::fs::rename(from, to).map_err(|e| Error::io("rename", from, e))?;
  if let Some(parent) = to.parent() {
    sync_dir(parent);
  }
  Ok(())
}

/// Promote `staging` to `current`. `validate` checks a generation directory; if the promoted
/// directory fails it, the previous one is restored and the error returned.
pub fn promote(
  layout: &StoreLayout,
  staging_name: &str,
  validate: &dyn Fn(&GenDir) -> Result<()>,
  progress: &dyn Fn(&str),
) -> Result<()> {
  let mut journal = SwapJournal {
    version: 1,
    operation_id: uuid::Uuid::new_v4().to_string(),
    staging_name: staging_name.to_string(),
    phase: SwapPhase::Prepared,
    started_at: now_iso(),
  };
  let publish = |j: &SwapJournal| write_json(&layout.swap_file(), j);
  let current = layout.current();
  let previous = layout.previous();
  let staging = layout.staging(staging_name);
  remove_dir_all_if_exists(&previous.dir)?;

  progress("swap: prepared");
  publish(&journal)?;
  crash_point("swap-prepared");
  if is_real_dir(&current.dir) {
    journal.phase = SwapPhase::PreviousMoved;
    publish(&journal)?;
    rename(&current.dir, &previous.dir)?;
    crash_point("swap-previous-moved");
  }
  journal.phase = SwapPhase::CurrentPromoted;
  publish(&journal)?;
  rename(&staging.dir, &current.dir)?;
  crash_point("swap-current-promoted");
  progress("swap: validating");
  if let Err(e) = validate(&current) {
    // Restore the previous generation; the failed one is discarded.
    remove_dir_all_if_exists(&current.dir)?;
    if is_real_dir(&previous.dir) {
      rename(&previous.dir, &current.dir)?;
    }
    let _ = std::fs::remove_file(layout.swap_file());
    return Err(e);
  }
  journal.phase = SwapPhase::Validated;
  publish(&journal)?;
  crash_point("swap-validated");
  remove_dir_all_if_exists(&previous.dir)?;
  let _ = std::fs::remove_file(layout.swap_file());
  let _ = std::fs::remove_file(layout.last_error_file());
  progress("swap: done");
  Ok(())
}

/// Complete or roll back an interrupted swap and remove orphaned staging directories.
/// Must run with the store lock held. Returns warnings describing what was repaired.
pub fn recover(layout: &StoreLayout, validate: &dyn Fn(&GenDir) -> Result<()>) -> Result<Vec<IndexIssue>> {
  let mut warnings = Vec::new();
  let journal = read_journal(layout);
  let had_journal = !matches!(journal, JsonFile::Missing);
  if let JsonFile::Invalid(msg) = &journal {
    warnings
      .push(IndexIssue::new("qmd_swap_interrupted", format!("Swap journal is malformed ({msg}); repairing")));
  }
  if let JsonFile::Valid(j) = &journal {
    warnings.push(IndexIssue::new(
      "qmd_swap_interrupted",
      format!("Recovered an interrupted index swap (phase {})", j.phase.as_str()),
    ));
  }
  let current = layout.current();
  let previous = layout.previous();
  // Without a journal or a leftover previous/ there is nothing to decide (and no need to open
  // the index: this runs at the start of every reindex).
  if had_journal || is_real_dir(&previous.dir) {
    let current_ok = is_real_dir(&current.dir) && validate(&current).is_ok();
    if current_ok {
      remove_dir_all_if_exists(&previous.dir)?;
    } else if is_real_dir(&previous.dir) {
      remove_dir_all_if_exists(&current.dir)?;
      rename(&previous.dir, &current.dir)?;
      warnings
        .push(IndexIssue::new("qmd_swap_interrupted", "Restored the previous index generation".to_string()));
    } else if is_real_dir(&current.dir) {
      // A promoted but invalid generation with nothing to fall back to: drop it (status: missing).
      remove_dir_all_if_exists(&current.dir)?;
    }
  }
  for name in layout.staging_dirs() {
    remove_dir_all_if_exists(&layout.staging(&name).dir)?;
  }
  if had_journal {
    let _ = std::fs::remove_file(layout.swap_file());
    // Warm readers of this process must reopen whatever generation recovery kept.
    super::bump_epoch(&layout.dir);
  }
  if had_journal && is_real_dir(&layout.current().dir) && validate(&layout.current()).is_ok() {
    let _ = std::fs::remove_file(layout.last_error_file());
  }
  Ok(warnings)
}
