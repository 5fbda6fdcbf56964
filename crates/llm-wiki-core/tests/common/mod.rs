//! Helpers shared by integration tests.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Run `writer` while `readers` threads call `read(reader, n)` (n = that reader's call count) in
/// a loop, each at least once, until the writer is done. `read` returns a failure description or
/// `None`. Returns every failure and the number of reads.
#[allow(dead_code)] // not every test crate that shares this module races
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

/// The model root, configured engine-wide; `None` (test skipped) when it is absent.
#[allow(dead_code)] // not every test crate that shares this module needs the model
pub fn models() -> Option<std::path::PathBuf> {
  let root = std::env::var_os("LLM_WIKI_MODELS_DIR")
    .map(std::path::PathBuf::from)
    .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.models"));
  if !root.join("runtime/runtime.json").is_file()
    || !root.join("all-MiniLM-L6-v2-int8/manifest.json").is_file()
  {
    eprintln!("SKIPPED: no model root at {} (run scripts/fetch_models.py)", root.display());
    return None;
  }
  llm_wiki_core::models::configure(llm_wiki_core::models::ConfigChange {
    model_roots: llm_wiki_core::models::Setting::Set(vec![root.clone()]),
    threads: llm_wiki_core::models::Setting::Set(2),
    ..Default::default()
  });
  Some(root)
}
