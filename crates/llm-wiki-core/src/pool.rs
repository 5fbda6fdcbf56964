//! rayon's global pool, named before its first use.
//!
//! The engine hands work to rayon's global pool in three places (a hybrid query's lexical list,
//! the parallel vector scan, an ANN build above 20k rows). Left to itself, rayon starts that pool
//! from whichever thread first uses it, with unnamed threads, and Linux gives an unnamed thread
//! its creator's name: the pool would outlive a reindex job or a query and carry that job's
//! name, so nothing looking at the process's threads (the addon's worker-lifecycle tests, a
//! user's `top -H`) could tell a finished job's threads from the pool's. Every use calls
//! [`global`] first, which names the pool's threads `llm-wiki-pool-N`. The pool also frees
//! large structures off a caller's path ([`drop_later`]).

use std::sync::Once;

/// Prefix of the global pool's thread names (Linux keeps 15 bytes of a thread name).
pub const THREAD_PREFIX: &str = "llm-wiki-pool-";

/// Starts rayon's global pool with named threads, once per process. If something else in the
/// process started it first (an embedding application's own rayon use), that pool is used as
/// it is: its threads were never ours to name.
pub fn global() {
  static START: Once = Once::new();
  START.call_once(|| {
    let _ = rayon::ThreadPoolBuilder::new().thread_name(|i| format!("{THREAD_PREFIX}{i}")).build_global();
  });
}

/// Drops `value` on the global pool instead of the caller's thread. For a large set of small
/// allocations made by other threads: a 100k-page walk's page paths (300k strings allocated on
/// the walk's threads, freed one by one into those threads' malloc arenas) cost a no-op reindex
/// ≈ 35 ms on its own thread after its work was done (docs/DECISIONS.md).
pub fn drop_later<T: Send + 'static>(value: T) {
  global();
  rayon::spawn(move || drop(value));
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn the_global_pool_started_from_a_named_thread_has_its_own_names() {
    let names = std::thread::Builder::new()
      .name("llm-wiki-job-7".into())
      .spawn(|| {
        global();
        rayon::broadcast(|_| std::thread::current().name().map(String::from))
      })
      .expect("spawn")
      .join()
      .expect("join");
    assert!(!names.is_empty());
    for name in names {
      let name = name.expect("every pool thread is named");
      assert!(name.starts_with(THREAD_PREFIX), "{name}");
    }
  }

  #[test]
  fn a_value_dropped_later_is_dropped_on_a_pool_thread() {
    struct Tell(std::sync::mpsc::Sender<Option<String>>);
    impl Drop for Tell {
      fn drop(&mut self) {
        let _ = self.0.send(std::thread::current().name().map(String::from));
      }
    }
    let (tx, rx) = std::sync::mpsc::channel();
    drop_later(Tell(tx));
    let name = rx.recv_timeout(std::time::Duration::from_secs(30)).expect("dropped");
    assert!(name.expect("a named thread").starts_with(THREAD_PREFIX));
  }
}
