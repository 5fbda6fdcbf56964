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
//!
//! Also the process's cap on background jobs ([`spawn_background`]) and the shared indexing
//! pools ([`indexing_pool`]): N vaults reindexing at once no longer start N job threads and N
//! rayon pools.

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

/// Background jobs (reindexes, model downloads) running at once in the process; further ones
/// wait in a FIFO queue. Not fitted: each reindex runs up to 4 indexing threads plus tantivy's
/// writer threads, so 2 jobs keep a process of N vaults at about 2 × (4 + 10) job threads instead
/// of N × that (issue 43: one uncapped OS thread per job), while a reindex of one vault never
/// waits for more than one other job. `LLM_WIKI_BACKGROUND_JOBS` (1 to 64) overrides it.
pub const MAX_BACKGROUND_JOBS: usize = 2;

type Job = Box<dyn FnOnce() + Send + 'static>;

struct Background {
  running: usize,
  waiting: std::collections::VecDeque<Job>,
}

static BACKGROUND: std::sync::Mutex<Background> =
  std::sync::Mutex::new(Background { running: 0, waiting: std::collections::VecDeque::new() });

/// The cap in force: [`MAX_BACKGROUND_JOBS`] or `LLM_WIKI_BACKGROUND_JOBS` (read once).
pub fn background_cap() -> usize {
  static CAP: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
  *CAP.get_or_init(|| {
    std::env::var("LLM_WIKI_BACKGROUND_JOBS")
      .ok()
      .and_then(|v| v.trim().parse::<usize>().ok())
      .filter(|n| (1..=64).contains(n))
      .unwrap_or(MAX_BACKGROUND_JOBS)
  })
}

/// Background jobs running and waiting now.
pub fn background_load() -> (usize, usize) {
  let q = BACKGROUND.lock().unwrap_or_else(|p| p.into_inner());
  (q.running, q.waiting.len())
}

/// Run `job` on a background thread named `name`, at most [`background_cap`] at once in the
/// process: when that many run, `job` waits in a FIFO queue and runs on the first thread that
/// finishes its own (a thread takes queued jobs until the queue is empty, then exits: an idle
/// process holds no job thread). `start` runs first on every new thread (the addon lowers the
/// thread's priority there). A job must catch its own panics (the addon's jobs do); one that
/// does not still frees its slot. Fails only when no thread can be started (the job is dropped).
pub fn spawn_background(name: &str, start: fn(), job: impl FnOnce() + Send + 'static) -> std::io::Result<()> {
  let cap = background_cap();
  let mut q = BACKGROUND.lock().unwrap_or_else(|p| p.into_inner());
  if q.running >= cap {
    q.waiting.push_back(Box::new(job));
    return Ok(());
  }
  q.running += 1;
  drop(q);
  let first: Job = Box::new(job);
  std::thread::Builder::new()
    .name(name.into())
    .spawn(move || {
      start();
      // Frees the slot when the thread ends, a panicking job included.
      struct Slot;
      impl Drop for Slot {
        fn drop(&mut self) {
          let mut q = BACKGROUND.lock().unwrap_or_else(|p| p.into_inner());
          q.running -= 1;
        }
      }
      let _slot = Slot;
      let mut next = Some(first);
      while let Some(job) = next.take() {
        job();
        next = BACKGROUND.lock().unwrap_or_else(|p| p.into_inner()).waiting.pop_front();
      }
    })
    .map(|_| ())
    .inspect_err(|_| {
      BACKGROUND.lock().unwrap_or_else(|p| p.into_inner()).running -= 1;
    })
}

/// The shared indexing pool of `threads` threads (named `llm-wiki-index-N`): every reindex asking
/// that many threads uses the same pool (their batches interleave), so concurrent reindexes add no
/// threads. One pool per distinct count (at most one per core; by default every reindex asks the
/// same count). Threads inherit the priority of the thread that first asks (the addon's lowered
/// background priority).
pub fn indexing_pool(threads: usize) -> std::result::Result<std::sync::Arc<rayon::ThreadPool>, String> {
  static POOLS: std::sync::Mutex<Vec<(usize, std::sync::Arc<rayon::ThreadPool>)>> =
    std::sync::Mutex::new(Vec::new());
  let mut pools = POOLS.lock().unwrap_or_else(|p| p.into_inner());
  if let Some((_, p)) = pools.iter().find(|(n, _)| *n == threads) {
    return Ok(p.clone());
  }
  let pool = rayon::ThreadPoolBuilder::new()
    .num_threads(threads)
    .thread_name(|i| format!("llm-wiki-index-{i}"))
    .build()
    .map_err(|e| e.to_string())?;
  let pool = std::sync::Arc::new(pool);
  pools.push((threads, pool.clone()));
  Ok(pool)
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn background_jobs_run_at_most_the_cap_at_once_on_at_most_that_many_threads() {
    use std::collections::HashSet;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    let cap = background_cap();
    let (now, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let threads = Arc::new(Mutex::new(HashSet::new()));
    let (tx, rx) = std::sync::mpsc::channel();
    let jobs = 4 * cap + 3;
    for i in 0..jobs {
      let (now, peak, threads, tx) = (now.clone(), peak.clone(), threads.clone(), tx.clone());
      spawn_background(
        "llm-wiki-test-bg",
        || {},
        move || {
          let n = now.fetch_add(1, Ordering::SeqCst) + 1;
          peak.fetch_max(n, Ordering::SeqCst);
          threads.lock().unwrap().insert(std::thread::current().id());
          std::thread::sleep(std::time::Duration::from_millis(20));
          now.fetch_sub(1, Ordering::SeqCst);
          let _ = tx.send(i);
        },
      )
      .unwrap();
    }
    let mut done: Vec<usize> = (0..jobs)
      .map(|_| rx.recv_timeout(std::time::Duration::from_secs(30)).expect("every job runs"))
      .collect();
    done.sort_unstable();
    assert_eq!(done, (0..jobs).collect::<Vec<_>>());
    assert!(
      peak.load(Ordering::SeqCst) <= cap,
      "{} jobs ran at once (cap {cap})",
      peak.load(Ordering::SeqCst)
    );
    assert!(
      threads.lock().unwrap().len() <= cap,
      "{} threads for {jobs} jobs",
      threads.lock().unwrap().len()
    );
    // A panicking job frees its slot.
    spawn_background("llm-wiki-test-bg", || {}, || panic!("job panic")).unwrap();
    let t0 = std::time::Instant::now();
    while background_load() != (0, 0) {
      assert!(t0.elapsed() < std::time::Duration::from_secs(30), "{:?}", background_load());
      std::thread::sleep(std::time::Duration::from_millis(5));
    }
  }

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
