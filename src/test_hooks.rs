//! Test-only hooks, compiled in only with the `test-hooks` cargo feature (`npm test` builds with
//! it; published binaries never have it, and no export depends on it, so `index.d.ts` is the
//! same either way). The crash points (`LLM_WIKI_CRASH_AT`) live in the engine crate.

/// `runCli(['__test-live-watch-hooks'])` resolves with the number of `watchWiki` teardown hooks
/// registered and not yet removed (a leak check; the CLI never sees the argument).
pub fn cli_hook(args: &[String]) -> Option<i32> {
  match args {
    [a] if a == "__test-live-watch-hooks" => {
      Some(crate::watch::LIVE_HOOKS.load(std::sync::atomic::Ordering::SeqCst) as i32)
    }
    _ => None,
  }
}

/// Environment variable holding the panic marker.
const PANIC_VAR: &str = "LLM_WIKI_TEST_PANIC";

/// Panic (on the job's thread) when `LLM_WIKI_TEST_PANIC` is set and the recall query starts
/// with its value: proves that a panic rejects with `internal_panic` instead of aborting Node.
pub fn panic_on_marked_query(query: &str) {
  if let Some(marker) = std::env::var(PANIC_VAR).ok().filter(|m| !m.is_empty()) {
    if query.starts_with(&marker) {
      panic!("{PANIC_VAR} hook: {query}");
    }
  }
}
