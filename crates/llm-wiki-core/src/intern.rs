//! A process-wide interner of shared strings, for values that repeat across pages by the
//! thousand: a vault's link targets name the same pages again and again (each page of the 100k
//! synthetic vault is the target of ≈ 29 links), and a manifest holds every page's links for the
//! whole of a build. One reference-counted copy per distinct string replaces one copy per use.
//!
//! Nothing is kept alive by the interner alone: a shard drops the strings only it still holds
//! whenever it has doubled since its last sweep, so its size stays within twice the strings in
//! use (plus a small floor) however long the process runs and whatever it indexes.

use std::hash::BuildHasher;
use std::sync::OnceLock;

use arcstr::ArcStr;
use foldhash::fast::FixedState;
use hashbrown::HashTable;
use parking_lot::Mutex;

/// Shards of the set, so loader threads interning at once rarely wait on one lock. Not fitted: a
/// power of two comfortably above the engine's thread count on the machines we target.
const SHARDS: usize = 16;

/// Strings a shard may hold before its first sweep. Not fitted: sweeps of a tiny set cost more
/// than the memory they free.
const SWEEP_FLOOR: usize = 1_024;

struct Shard {
  /// The shared copies, found by the hash [`intern`] computes once per call (a set keyed by the
  /// string would hash it again: the interner runs for every link of every page a manifest
  /// parse reads, and was a third of a fresh process's first recall at 100k pages).
  set: HashTable<ArcStr>,
  /// Size at which the next sweep runs.
  sweep_at: usize,
}

fn shards() -> &'static [Mutex<Shard>; SHARDS] {
  static S: OnceLock<[Mutex<Shard>; SHARDS]> = OnceLock::new();
  S.get_or_init(|| {
    std::array::from_fn(|_| Mutex::new(Shard { set: HashTable::new(), sweep_at: SWEEP_FLOOR }))
  })
}

/// The hash of a string, for the shard and the set (fixed: the same in every call).
fn hash(s: &str) -> u64 {
  FixedState::default().hash_one(s)
}

/// The shared copy of `s` (made on first use). The empty string is a static literal.
pub fn intern(s: &str) -> ArcStr {
  if s.is_empty() {
    return ArcStr::new();
  }
  let h = hash(s);
  // The shard comes from the high bits so it does not correlate with the set's buckets (the low
  // bits and the top 7, hashbrown's control bytes, are what the table looks at).
  let mut shard = shards()[(h >> 52) as usize % SHARDS].lock();
  if let Some(found) = shard.set.find(h, |a| a.as_str() == s) {
    return found.clone();
  }
  if shard.set.len() >= shard.sweep_at {
    // Only the set holds a string whose count is 1, and new references are made under this
    // lock, so none can appear while the sweep runs.
    shard.set.retain(|a| ArcStr::strong_count(a) != Some(1));
    let live = shard.set.len();
    shard.set.shrink_to(live * 2, |a| hash(a));
    shard.sweep_at = (live * 2).max(SWEEP_FLOOR);
  }
  let shared = ArcStr::from(s);
  shard.set.insert_unique(h, shared.clone(), |a| hash(a));
  shared
}

/// Strings the interner holds (in use or awaiting a sweep), for tests and probes.
pub fn held() -> usize {
  shards().iter().map(|s| s.lock().set.len()).sum()
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn equal_strings_share_one_copy() {
    let a = intern("concepts/intern-test-shared");
    let b = intern(&String::from("concepts/intern-test-shared"));
    assert!(ArcStr::ptr_eq(&a, &b));
    assert_eq!(a, "concepts/intern-test-shared");
    assert!(!ArcStr::ptr_eq(&a, &intern("concepts/intern-test-other")));
    assert_eq!(intern(""), "");
  }

  /// Strings no one holds any more are swept once a shard doubles: the interner does not grow
  /// with every distinct string a long-lived process has ever seen.
  #[test]
  fn unused_strings_are_swept() {
    let kept: Vec<ArcStr> = (0..100).map(|i| intern(&format!("intern-test-kept-{i}"))).collect();
    for round in 0..20 {
      for i in 0..SWEEP_FLOOR * SHARDS {
        drop(intern(&format!("intern-test-dropped-{round}-{i}")));
      }
    }
    // 20 rounds put 327,680 distinct strings through it; a shard holds at most twice its live
    // strings plus the floor (other tests intern a few strings of their own concurrently).
    assert!(held() <= 2 * SWEEP_FLOOR * SHARDS + 10_000, "held {}", held());
    for (i, k) in kept.iter().enumerate() {
      assert!(ArcStr::ptr_eq(k, &intern(&format!("intern-test-kept-{i}"))));
    }
  }
}
