//! `watchWiki`: the engine's live index ([`llm_wiki_core::watch`]) behind a JS handle. Events
//! cross from the watcher thread to JS through a threadsafe function that keeps the event loop
//! alive while the watcher is open (like `fs.watch`) and is released when it closes, so the
//! process can exit after `close()`. An AbortSignal closes the watcher, and so does the teardown
//! of the Node environment that started it (a terminated worker thread, process exit).

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use napi::bindgen_prelude::*;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::{sys, Env};
use napi_derive::napi;

use llm_wiki_core::store::Component;
use llm_wiki_core::watch::{
  self as core_watch, Backend, WatchCloser, WatchEvent, WatchHandle, WatchOptions, WatchSink, WatchStatus,
};

use crate::error::Failure;
use crate::task;
use crate::types::VaultPaths;

/// Options of `watchWiki`.
#[napi(object, object_to_js = false)]
pub struct WatchWikiOptions {
  /// Components to keep current; default `["lexical", "vectors"]` (lexical first, vectors in the
  /// background at lowered priority). Must not be empty.
  #[napi(ts_type = "Array<'lexical' | 'vectors'>")]
  pub components: Option<Vec<String>>,
  /// Quiet time before a batch of changes is indexed (default 200 ms, at most 60,000).
  pub debounce_ms: Option<u32>,
  /// Use polling instead of OS events (network filesystems). Automatic when OS events cannot be
  /// set up.
  pub poll: Option<bool>,
  /// Interval of the polling backend (default 2,000 ms, at least 100).
  pub poll_interval_ms: Option<u32>,
  /// Worker threads of each reindex (0 or absent: the engine's default).
  pub threads: Option<u32>,
  /// Watcher events, delivered on the JS thread in order. While set, the open watcher keeps the
  /// process alive (like `fs.watch`); `close()` releases it.
  pub on_event: Option<ThreadsafeFunction<WatchEvent, (), WatchEvent, Status, false>>,
  /// Aborting closes the watcher.
  pub signal: Option<AbortSignal>,
  /// Set by the JS wrapper when `signal` was already aborted (the watcher never starts).
  pub aborted: Option<bool>,
}

/// Closes a watcher from an abort signal or an environment teardown, whichever comes, also
/// before the watcher has finished starting.
#[derive(Default)]
struct CloseSlot {
  closed: AtomicBool,
  closer: Mutex<Option<WatchCloser>>,
}

impl CloseSlot {
  fn close(&self) {
    self.closed.store(true, Ordering::SeqCst);
    if let Some(c) = self.closer.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
      c.close();
    }
  }
  fn set(&self, closer: WatchCloser) {
    *self.closer.lock().unwrap_or_else(|e| e.into_inner()) = Some(closer.clone());
    if self.closed.load(Ordering::SeqCst) {
      closer.close();
    }
  }
}

/// Teardown hooks registered and not yet run or removed (for the test hooks' leak check).
pub(crate) static LIVE_HOOKS: std::sync::atomic::AtomicIsize = std::sync::atomic::AtomicIsize::new(0);

unsafe extern "C" fn close_on_teardown(data: *mut c_void) {
  // SAFETY: `data` is the box `watch_wiki` leaked; the hook runs at most once, and is removed
  // (with the box freed) by `close()` or a failed start otherwise.
  let slot = unsafe { Box::from_raw(data as *mut Arc<CloseSlot>) };
  LIVE_HOOKS.fetch_sub(1, Ordering::SeqCst);
  slot.close();
}

/// Remove the teardown hook whose data is `data` and free its box (on the JS thread of the
/// environment it was added to, which is alive, so the hook has not run).
fn remove_hook(env: &Env, data: usize) {
  // SAFETY: see above; once removed, the hook never runs, so the box is ours to free.
  let status =
    unsafe { sys::napi_remove_env_cleanup_hook(env.raw(), Some(close_on_teardown), data as *mut c_void) };
  if status == sys::Status::napi_ok {
    drop(unsafe { Box::from_raw(data as *mut Arc<CloseSlot>) });
    LIVE_HOOKS.fetch_sub(1, Ordering::SeqCst);
  }
}

/// A running watcher (`watchWiki`). `close()` stops it; dropping the last reference does too.
#[napi]
pub struct WikiWatcher {
  handle: Arc<Mutex<Option<WatchHandle>>>,
  slot: Arc<CloseSlot>,
  /// The teardown hook's data, until `close()` removes the hook.
  hook: Option<usize>,
}

#[napi]
impl WikiWatcher {
  /// Stop watching: a running reindex is cancelled (the last good index stays), the `closed`
  /// event is delivered, and the event listener is released, so the process can exit. Resolves
  /// when the watcher thread has exited; later calls resolve at once.
  #[napi(ts_return_type = "Promise<void>")]
  pub fn close<'env>(&mut self, env: &'env Env) -> Result<PromiseRaw<'env, ()>> {
    self.slot.close();
    if let Some(data) = self.hook.take() {
      remove_hook(env, data);
    }
    let handle = self.handle.clone();
    task::spawn(env, None, task::Priority::Interactive, move || {
      let taken = handle.lock().unwrap_or_else(|e| e.into_inner()).take();
      if let Some(mut h) = taken {
        h.close();
      }
      Ok(())
    })
  }

  /// What the watcher is doing: its state, the paths waiting for a reindex, whether vectors lag.
  #[napi]
  pub fn status(&self) -> WatchStatus {
    let guard = self.handle.lock().unwrap_or_else(|e| e.into_inner());
    match guard.as_ref() {
      Some(h) => h.status(),
      None => WatchStatus {
        state: "closed",
        backend: Backend::Native,
        pending_paths: 0,
        pending_full_scan: false,
        vectors_pending: false,
        reindexes: 0,
        overflows: 0,
        last_indexed_at: None,
        last_error: None,
      },
    }
  }
}

/// Watch a vault and keep its index current: a catch-up reindex first, then every debounced
/// batch of page changes (lexical first, vectors in the background). Resolves with the watcher
/// once the OS watch is armed; rejects `invalid_argument` (no wiki directory, bad options) or
/// `cancelled` (the signal was already aborted).
#[napi(catch_unwind, ts_return_type = "Promise<WikiWatcher>")]
pub fn watch_wiki<'env>(
  env: &'env Env,
  paths: VaultPaths,
  options: Option<WatchWikiOptions>,
) -> Result<PromiseRaw<'env, WikiWatcher>> {
  let o = options.unwrap_or(WatchWikiOptions {
    components: None,
    debounce_ms: None,
    poll: None,
    poll_interval_ms: None,
    threads: None,
    on_event: None,
    signal: None,
    aborted: None,
  });
  let slot = Arc::new(CloseSlot::default());
  if o.aborted.unwrap_or(false) {
    slot.close();
  }
  if let Some(signal) = o.signal.as_ref() {
    let s = slot.clone();
    signal.on_abort(move || s.close());
  }
  let data = Box::into_raw(Box::new(slot.clone()));
  // SAFETY: on the JS thread that owns `env`; `data` stays valid until the hook runs or
  // `close()` removes it.
  let status = unsafe { sys::napi_add_env_cleanup_hook(env.raw(), Some(close_on_teardown), data.cast()) };
  let hook = if status == sys::Status::napi_ok {
    LIVE_HOOKS.fetch_add(1, Ordering::SeqCst);
    Some(data as usize)
  } else {
    drop(unsafe { Box::from_raw(data) });
    None
  };
  let on_event = o.on_event.map(Arc::new);
  let threads = crate::args::thread_count(o.threads);
  let (components, debounce, poll, poll_interval) = (o.components, o.debounce_ms, o.poll, o.poll_interval_ms);
  // A start that fails returns no watcher to own the hook: it is removed when the job settles.
  let on_failure = move |env: &Env, ok: bool| {
    if let (false, Some(data)) = (ok, hook) {
      remove_hook(env, data);
    }
  };
  task::spawn_settled(
    env,
    None,
    task::Priority::Interactive,
    move || {
      if slot.closed.load(Ordering::SeqCst) {
        return Err(Failure { code: "cancelled".into(), message: "operation cancelled".into() });
      }
      let paths = paths.resolve()?;
      let components = Component::parse_list(components.as_deref()).map_err(Failure::from)?;
      let opts = WatchOptions {
        components,
        debounce: Duration::from_millis(debounce.unwrap_or(200).min(60_000) as u64),
        poll: poll.unwrap_or(false),
        poll_interval: Duration::from_millis(poll_interval.unwrap_or(2_000).max(100) as u64),
        threads,
        simulate_overflow: test_overflow(),
        ..Default::default()
      };
      let sink: WatchSink = Arc::new(move |e: WatchEvent| {
        if let Some(cb) = &on_event {
          cb.call(e, ThreadsafeFunctionCallMode::NonBlocking);
        }
      });
      let handle = core_watch::watch_wiki(&paths, opts, sink).map_err(Failure::from)?;
      slot.set(handle.closer());
      Ok(WikiWatcher { handle: Arc::new(Mutex::new(Some(handle))), slot, hook })
    },
    on_failure,
  )
}

/// `test-hooks` builds only: `LLM_WIKI_TEST_WATCH_OVERFLOW=1` makes the watcher treat every OS
/// event as an overflow notice (the JS tests' injected fault).
fn test_overflow() -> bool {
  cfg!(feature = "test-hooks") && std::env::var("LLM_WIKI_TEST_WATCH_OVERFLOW").is_ok_and(|v| v == "1")
}
