//! Helpers shared by integration tests.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Run `writer` while `readers` threads call `read(reader, n)` (n = that reader's call count) in
/// a loop, each at least once, until the writer is done. `read` returns a failure description or
/// `None`. Returns every failure and the number of reads.
pub fn race(
  readers: usize,
  read: impl Fn(usize, usize) -> Option<String> + Sync,
  writer: impl FnOnce(),
) -> (Vec<String>, usize) {
  let done = AtomicBool::new(false);
  let reads = AtomicUsize::new(0);
  let failures = std::thread::scope(|s| {
    let handles: Vec<_> = (0..readers)
      .map(|r| {
        let (read, done, reads) = (&read, &done, &reads);
        s.spawn(move || {
          let mut failures = Vec::new();
          for n in 0.. {
            failures.extend(read(r, n));
            reads.fetch_add(1, Ordering::Relaxed);
            if done.load(Ordering::SeqCst) {
              break;
            }
          }
          failures
        })
      })
      .collect();
    writer();
    done.store(true, Ordering::SeqCst);
    handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
  });
  (failures, reads.load(Ordering::Relaxed))
}
