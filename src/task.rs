//! Where async exports run: on the addon's own threads, never on libuv's pool, which the host
//! needs for its own file I/O (4 threads by default: four long reindexes on it stalled every `fs`
//! call of the host for seconds). Each job settles its promise from its thread through a
//! threadsafe function. Panics are caught on the job's thread (a panic crossing the FFI boundary
//! would abort Node), failures reject with the engine's `err.code`, and the jobs of a Node
//! environment that is torn down (a terminated worker thread, process exit) are cancelled so
//! they stop at their next cancellation point.
//!
//! Two kinds of job:
//! * interactive (recall, status, the CLI): the blocking pool of the tokio runtime napi-rs owns;
//! * background (reindex, model downloads): at most `pool::MAX_BACKGROUND_JOBS` at once in the
//!   process (`llm_wiki_core::pool::spawn_background`; more wait in a FIFO queue), on threads at
//!   lowered CPU priority on Linux (nice +10, inherited by the threads the job starts), so long
//!   indexing never preempts the host's JavaScript thread or its I/O. Priority cannot be raised
//!   back without privileges, so these threads serve background jobs only; one exits when the
//!   queue is empty.

use std::ffi::c_void;
use std::time::Duration;

use llm_wiki_core::store::CancelFlag;
use napi::bindgen_prelude::*;
use napi::{sys, Env};

use crate::error::{Failure, Outcome};

/// Interactive jobs running at once (threads of the blocking pool); further ones wait in its
/// queue.
const MAX_INTERACTIVE_JOBS: usize = 64;
/// An idle pool thread exits after this long, so an idle addon holds no job threads.
const IDLE_THREAD_EXIT: Duration = Duration::from_secs(10);
/// Nice value of background job threads (Linux).
#[cfg(target_os = "linux")]
const BACKGROUND_NICE: i32 = 10;

/// One small runtime for the whole process, shared by every Node environment (main thread and
/// workers). napi-rs shuts it down when the last environment goes, joining its threads for at
/// most 100 ms: idle threads exit at once, so process exit waits for nothing.
#[napi_derive::module_init]
fn init() {
  let runtime = napi::tokio::runtime::Builder::new_multi_thread()
    .worker_threads(1) // only awaits job results; the work runs on job threads
    .max_blocking_threads(MAX_INTERACTIVE_JOBS)
    .thread_keep_alive(IDLE_THREAD_EXIT)
    .thread_name("llm-wiki-job")
    .build();
  // On failure napi-rs builds its default runtime instead.
  if let Ok(rt) = runtime {
    create_custom_tokio_runtime(rt);
  }
}

/// How a job is scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Priority {
  /// Someone waits for the answer now: the shared pool, normal priority.
  Interactive,
  /// Long work in the background: its own thread, lowered priority.
  Background,
}

/// Run `work` on a job thread and return a promise of its result. `cancel` (if any) is also set
/// when this Node environment is torn down before the job settles.
pub fn spawn<'env, T>(
  env: &'env Env,
  cancel: Option<&CancelFlag>,
  priority: Priority,
  work: impl FnOnce() -> Outcome<T> + Send + 'static,
) -> Result<PromiseRaw<'env, T>>
where
  T: ToNapiValue + Send + 'static,
{
  spawn_settled(env, cancel, priority, work, |_, _| {})
}

/// [`spawn`], with `settled` called on the JS thread when the job settles, before its promise
/// does (`true` when it succeeded): where a caller frees what it registered for a job whose
/// result will never own it (a failed `watchWiki` start's teardown hook).
pub fn spawn_settled<'env, T>(
  env: &'env Env,
  cancel: Option<&CancelFlag>,
  priority: Priority,
  work: impl FnOnce() -> Outcome<T> + Send + 'static,
  settled: impl FnOnce(&Env, bool) + 'static,
) -> Result<PromiseRaw<'env, T>>
where
  T: ToNapiValue + Send + 'static,
{
  let result = match priority {
    Priority::Interactive => JobResult::Pool(spawn_blocking(move || run_caught(work))),
    Priority::Background => {
      let (tx, rx) = napi::tokio::sync::oneshot::channel();
      llm_wiki_core::pool::spawn_background("llm-wiki-background", lower_priority, move || {
        let _ = tx.send(run_caught(work));
      })
      .map_err(|e| Error::from_reason(format!("cannot start a job thread: {e}")))?;
      JobResult::Thread(rx)
    }
  };
  let teardown = cancel.map(|c| CancelOnTeardown::register(env, c)).transpose()?;
  env.spawn_future_with_callback(
    async move {
      Ok(match result {
        JobResult::Pool(handle) => {
          handle.await.unwrap_or_else(|e| Err(internal(format!("the job did not finish: {e}"))))
        }
        JobResult::Thread(rx) => {
          rx.await.unwrap_or_else(|_| Err(internal("the job thread ended without a result".into())))
        }
      })
    },
    move |env, outcome: Outcome<T>| {
      if let Some(t) = teardown {
        t.unregister(env);
      }
      settled(env, outcome.is_ok());
      outcome.map_err(|f| f.to_napi(env))
    },
  )
}

enum JobResult<T> {
  Pool(napi::tokio::task::JoinHandle<Outcome<T>>),
  Thread(napi::tokio::sync::oneshot::Receiver<Outcome<T>>),
}

/// Lower the calling thread's CPU priority; threads it starts inherit it.
fn lower_priority() {
  #[cfg(target_os = "linux")]
  // SAFETY: plain syscalls on the calling thread's own id.
  unsafe {
    // Failure only leaves the normal priority.
    let _ = libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, BACKGROUND_NICE);
  }
}

fn internal(message: String) -> Failure {
  Failure { code: "internal_panic".into(), message }
}

/// Run `work`, turning a panic into an `internal_panic` failure.
fn run_caught<T>(work: impl FnOnce() -> Outcome<T>) -> Outcome<T> {
  std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)).unwrap_or_else(|payload| {
    let msg = llm_wiki_core::error::panic_message(payload.as_ref());
    Err(internal(format!("internal error (panic): {msg}")))
  })
}

/// An environment cleanup hook that cancels one job. Registered and removed on the JS thread;
/// its data (a boxed flag) is freed by whichever happens first: the hook running at teardown, or
/// its removal when the job's promise settles.
struct CancelOnTeardown {
  data: usize,
}

unsafe extern "C" fn cancel_job(data: *mut c_void) {
  // SAFETY: `data` is the box `register` leaked; the hook runs at most once and is removed
  // (with the box freed) otherwise.
  let flag = unsafe { Box::from_raw(data as *mut CancelFlag) };
  flag.cancel();
}

impl CancelOnTeardown {
  fn register(env: &Env, cancel: &CancelFlag) -> Result<Self> {
    let data = Box::into_raw(Box::new(cancel.clone()));
    // SAFETY: called on the JS thread that owns `env`; `data` stays valid until freed below or
    // by the hook.
    let status = unsafe { sys::napi_add_env_cleanup_hook(env.raw(), Some(cancel_job), data.cast()) };
    if status != sys::Status::napi_ok {
      drop(unsafe { Box::from_raw(data) });
      return Err(Error::from_reason("cannot register an environment cleanup hook"));
    }
    Ok(CancelOnTeardown { data: data as usize })
  }

  /// Remove the hook (the job settled while the environment is alive) and free its data.
  fn unregister(self, env: &Env) {
    let data = self.data as *mut CancelFlag;
    // SAFETY: the settle callback runs on the JS thread of the environment the hook was added to,
    // before that environment's teardown (which would have run the hook instead).
    let status = unsafe { sys::napi_remove_env_cleanup_hook(env.raw(), Some(cancel_job), data.cast()) };
    if status == sys::Status::napi_ok {
      drop(unsafe { Box::from_raw(data) });
    }
  }
}
