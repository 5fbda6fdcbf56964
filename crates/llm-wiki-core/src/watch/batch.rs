//! Coalescing of file-system events into reindex batches: a debounce window (a batch is due
//! once no relevant event arrived for `debounce`), bounded by `max_wait` after its first event so
//! a never-ending stream of edits still gets indexed, and a cap on the paths remembered (past it
//! the batch becomes a full scan: memory stays bounded during a checkout of any size).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// Paths remembered per batch; beyond this a batch is a full scan.
pub const MAX_TRACKED_PATHS: usize = 50_000;

/// The changes of one debounce window: what the reindex must look at.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Batch {
  /// Page paths relative to `wiki/` (`/`-separated, NFC) created, modified, renamed or deleted.
  pub paths: BTreeSet<String>,
  /// Folders (relative to `wiki/`) created, renamed or deleted: every page below may have changed.
  pub dirs: BTreeSet<String>,
  /// The change set is unknown (start-up catch-up, OS overflow, a watcher error, too many paths):
  /// the whole vault must be scanned.
  pub full_scan: bool,
}

impl Batch {
  /// True when nothing changed.
  pub fn is_empty(&self) -> bool {
    self.paths.is_empty() && self.dirs.is_empty() && !self.full_scan
  }
  /// Changed page paths plus folders, or `None` when the whole vault must be scanned: the set a
  /// reindex may restrict itself to.
  pub fn changed_paths(&self) -> Option<Vec<String>> {
    (!self.full_scan).then(|| self.paths.iter().chain(self.dirs.iter()).cloned().collect())
  }
  /// Number of paths (pages + folders) in the batch.
  pub fn len(&self) -> usize {
    self.paths.len() + self.dirs.len()
  }
  fn merge(&mut self, other: Batch) {
    self.full_scan |= other.full_scan;
    self.paths.extend(other.paths);
    self.dirs.extend(other.dirs);
    self.cap();
  }
  fn cap(&mut self) {
    if self.full_scan || self.len() > MAX_TRACKED_PATHS {
      self.full_scan = true;
      self.paths.clear();
      self.dirs.clear();
    }
  }
}

/// Changes waiting for their reindex, with the times that decide when it is due.
#[derive(Debug, Default)]
pub struct Pending {
  batch: Batch,
  first: Option<Instant>,
  last: Option<Instant>,
  immediate: bool,
}

impl Pending {
  /// Nothing pending.
  pub fn new() -> Self {
    Self::default()
  }
  fn touch(&mut self, now: Instant) {
    self.first.get_or_insert(now);
    self.last = Some(now);
  }
  /// A page path changed.
  pub fn add_page(&mut self, rel: String, now: Instant) {
    self.touch(now);
    if !self.batch.full_scan {
      self.batch.paths.insert(rel);
      self.batch.cap();
    }
  }
  /// A folder changed.
  pub fn add_dir(&mut self, rel: String, now: Instant) {
    self.touch(now);
    if !self.batch.full_scan {
      self.batch.dirs.insert(rel);
      self.batch.cap();
    }
  }
  /// The change set is unknown: scan everything. `immediate` skips the debounce (start-up).
  pub fn full_scan(&mut self, now: Instant, immediate: bool) {
    self.touch(now);
    self.batch.full_scan = true;
    self.batch.cap();
    self.immediate |= immediate;
  }
  /// True when nothing is pending.
  pub fn is_empty(&self) -> bool {
    self.batch.is_empty()
  }
  /// When the pending batch's first event arrived.
  pub fn first_seen(&self) -> Option<Instant> {
    self.first
  }
  /// The pending batch (for status).
  pub fn batch(&self) -> &Batch {
    &self.batch
  }
  /// How long until the batch is due (zero when due now), `None` when nothing is pending.
  pub fn due_in(&self, now: Instant, debounce: Duration, max_wait: Duration) -> Option<Duration> {
    if self.batch.is_empty() {
      return None;
    }
    if self.immediate {
      return Some(Duration::ZERO);
    }
    let (first, last) = (self.first?, self.last?);
    let quiet = (last + debounce).saturating_duration_since(now);
    let capped = (first + max_wait).saturating_duration_since(now);
    Some(quiet.min(capped))
  }
  /// Take the batch for a reindex, leaving nothing pending.
  pub fn take(&mut self) -> Batch {
    let b = std::mem::take(&mut self.batch);
    self.first = None;
    self.last = None;
    self.immediate = false;
    b
  }
  /// Put back a batch whose reindex did not happen (busy lock, failure): its changes are kept,
  /// merged with whatever arrived meanwhile, and due again at once (the caller's retry delay
  /// decides when). `first` is when its first event arrived.
  pub fn restore(&mut self, b: Batch, first: Instant) {
    if b.is_empty() {
      return;
    }
    self.batch.merge(b);
    self.first = Some(self.first.map_or(first, |f| f.min(first)));
    self.last = Some(self.last.unwrap_or(first));
    self.immediate = true;
  }
  /// Forget everything (the vault is gone; its return triggers a full scan).
  pub fn clear(&mut self) {
    self.take();
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  const D: Duration = Duration::from_millis(200);
  const MAX: Duration = Duration::from_secs(2);

  #[test]
  fn debounce_waits_for_quiet() {
    let t0 = Instant::now();
    let mut p = Pending::new();
    assert_eq!(p.due_in(t0, D, MAX), None);
    p.add_page("a.md".into(), t0);
    assert_eq!(p.due_in(t0, D, MAX), Some(D));
    // Another event 150 ms later pushes the window.
    p.add_page("b.md".into(), t0 + Duration::from_millis(150));
    assert_eq!(p.due_in(t0 + Duration::from_millis(200), D, MAX), Some(Duration::from_millis(150)));
    assert_eq!(p.due_in(t0 + Duration::from_millis(350), D, MAX), Some(Duration::ZERO));
    let b = p.take();
    assert_eq!(b.paths.iter().cloned().collect::<Vec<_>>(), ["a.md", "b.md"]);
    assert!(p.is_empty());
  }

  #[test]
  fn a_continuous_stream_is_flushed_after_max_wait() {
    let t0 = Instant::now();
    let mut p = Pending::new();
    let mut t = t0;
    while t < t0 + Duration::from_secs(3) {
      p.add_page(format!("p{}.md", (t - t0).as_millis()), t);
      t += Duration::from_millis(50);
      if p.due_in(t, D, MAX) == Some(Duration::ZERO) {
        break;
      }
    }
    assert!(t - t0 >= MAX && t - t0 < MAX + Duration::from_millis(100), "{:?}", t - t0);
  }

  #[test]
  fn a_burst_coalesces_into_one_batch_and_repeats_collapse() {
    let t0 = Instant::now();
    let mut p = Pending::new();
    // A checkout: 5,000 files, each reported 3 times (create, modify, close) within 1 s.
    for i in 0..15_000u32 {
      p.add_page(format!("dir{}/p{}.md", (i / 3) % 50, i / 3), t0 + Duration::from_micros(i as u64 * 60));
    }
    let b = p.take();
    assert_eq!(b.paths.len(), 5_000);
    assert!(!b.full_scan);
    assert_eq!(b.changed_paths().unwrap().len(), 5_000);
  }

  #[test]
  fn too_many_paths_become_a_full_scan() {
    let t0 = Instant::now();
    let mut p = Pending::new();
    for i in 0..=MAX_TRACKED_PATHS {
      p.add_page(format!("p{i}.md"), t0);
    }
    let b = p.take();
    assert!(b.full_scan && b.paths.is_empty());
    assert_eq!(b.changed_paths(), None);
  }

  #[test]
  fn restore_keeps_changes_and_merges_new_ones() {
    let t0 = Instant::now();
    let mut p = Pending::new();
    p.add_page("a.md".into(), t0);
    let b = p.take();
    p.add_dir("folder".into(), t0 + D);
    p.restore(b, t0 + D);
    let b = p.take();
    assert_eq!(b.paths.len(), 1);
    assert_eq!(b.dirs.len(), 1);
    // A full scan absorbs path lists.
    p.full_scan(t0, false);
    p.add_page("c.md".into(), t0);
    let b = p.take();
    assert!(b.full_scan && b.paths.is_empty());
  }

  #[test]
  fn start_up_scan_is_immediate() {
    let t0 = Instant::now();
    let mut p = Pending::new();
    p.full_scan(t0, true);
    assert_eq!(p.due_in(t0, D, MAX), Some(Duration::ZERO));
  }
}
